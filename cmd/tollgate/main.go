// Command tollgate is the Tollgate LLM gateway and metering ledger.
//
//	tollgate serve   --config tollgate.yaml   every role in one process
//	tollgate gateway --config tollgate.yaml   the LLM API only
//	tollgate meter                            the meter worker only
//	tollgate admin                            the admin API only
//	tollgate migrate                          apply database migrations
//	tollgate demo                             seed a demo customer and key, print curl commands
//	tollgate NOUN VERB [flags]                admin commands: a client of the admin API
//	                                          (customers, keys, prices, overrides, credits,
//	                                          balance, usage, events, statements, export,
//	                                          reconcile, rerate); see tollgate --help
//
// Environment: TOLLGATE_DATABASE_URL, TOLLGATE_NATS_URL, TOLLGATE_ADMIN_TOKEN, TOLLGATE_ADMIN_URL,
// TOLLGATE_LISTEN (default :8080), TOLLGATE_ADMIN_LISTEN (default :8081),
// TOLLGATE_DATA_DIR (default ./tollgate-data).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// serverUsage is the top of `tollgate --help`: the server commands.
const serverUsage = `tollgate: an OpenAI-compatible LLM gateway that meters every token into a Postgres ledger.

Usage:
  tollgate serve   --config FILE   run gateway, meter worker and admin API in one process
                                   (embeds JetStream when TOLLGATE_NATS_URL is empty)
  tollgate gateway --config FILE   run only the LLM API (needs TOLLGATE_NATS_URL)
  tollgate meter                   run only the meter worker (needs TOLLGATE_NATS_URL)
  tollgate admin                   run only the admin API
  tollgate migrate [--down-to N]   apply the database migrations and exit (or roll back to N)
  tollgate demo                    create a demo customer and key on a running server,
                                   and print curl commands to try it
  tollgate config check --config FILE
                                   check a configuration file and explain what is wrong
  tollgate NOUN VERB [flags]       administer a running server through its admin API
                                   (customers, keys, prices, credits, usage...: see below)
`

// envUsage documents the environment.
const envUsage = `Environment:
  TOLLGATE_DATABASE_URL   Postgres URL (default postgres://postgres@127.0.0.1:5432/tollgate)
  TOLLGATE_NATS_URL       NATS URL; empty means serve embeds a JetStream server
  TOLLGATE_ADMIN_TOKEN    bearer token for the admin API (required for serve and admin;
                          admin commands send it)
  TOLLGATE_ADMIN_URL      admin API base URL for admin commands (default http://127.0.0.1:8081)
  TOLLGATE_LISTEN         LLM and customer API address (default :8080)
  TOLLGATE_ADMIN_LISTEN   admin API, /metrics, /healthz and /readyz address (default :8081;
                          every role serves the last three there)
  TOLLGATE_DATA_DIR       local data: the usage spool and embedded JetStream (default ./tollgate-data)
  TOLLGATE_SHUTDOWN_GRACE how long streams may finish after SIGTERM (default 30s)
  TOLLGATE_LOG_LEVEL      debug, info, warn or error (default info; at warn only
                          failed requests are logged)
`

func main() {
	logs := newLogBuffer(os.Stderr)
	log, err := newLogger(logs, os.Getenv("TOLLGATE_LOG_LEVEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tollgate:", err)
		os.Exit(2)
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, fullUsage())
		os.Exit(2)
	}
	// Every way out below writes the buffered log lines first.
	exit := func(code int) {
		_ = logs.Stop()
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "serve":
		err = runRoles(ctx, log, args, roles{gateway: true, meter: true, admin: true})
	case "gateway":
		err = runRoles(ctx, log, args, roles{gateway: true})
	case "meter":
		err = runRoles(ctx, log, args, roles{meter: true})
	case "admin":
		err = runRoles(ctx, log, args, roles{admin: true})
	case "migrate":
		err = migrate(ctx, log, args)
	case "demo":
		err = demo(ctx, args)
	case "config":
		exit(configCommand(args, os.Stdout, os.Stderr))
	default:
		// help, --help and the admin commands (customers, keys, ...);
		// runCLI also reports unknown commands, with exit code 2.
		code := runCLI(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
		stop()
		exit(code)
	}
	if err != nil {
		_ = logs.Stop() // the log's lines before the error that ends the process
		fmt.Fprintf(os.Stderr, "tollgate %s: %v\n", cmd, err)
		exit(1)
	}
	exit(0)
}

// configFlag parses --config FILE from args.
func configFlag(name string, args []string, required bool) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", "", "YAML configuration file (providers, models, seed prices)")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if required && *path == "" {
		return "", fmt.Errorf("--config FILE is required")
	}
	return *path, nil
}
