// Command tollgate is the Tollgate LLM gateway and metering ledger.
//
//	tollgate serve   --config tollgate.yaml   every role in one process
//	tollgate gateway --config tollgate.yaml   the LLM API only
//	tollgate meter   [--config tollgate.yaml] the meter worker only
//	tollgate admin   [--config tollgate.yaml] the admin API only
//	tollgate migrate                          apply database migrations
//	tollgate demo                             seed a demo customer and key, print curl commands
//	tollgate version                          print the build's version, revision and Go version
//	tollgate NOUN VERB [flags]                admin commands: a client of the admin API
//	                                          (customers, keys, prices, overrides, credits,
//	                                          balance, usage, events, statements, export,
//	                                          reconcile, rerate); see tollgate --help
//
// Environment: TOLLGATE_DATABASE_URL, TOLLGATE_NATS_URL, TOLLGATE_ADMIN_TOKEN, TOLLGATE_ADMIN_URL,
// TOLLGATE_LISTEN (default :8080), TOLLGATE_ADMIN_LISTEN (default :8081),
// TOLLGATE_DATA_DIR (default ./tollgate-data), TOLLGATE_SHUTDOWN_GRACE (default 30s),
// TOLLGATE_PPROF, TOLLGATE_LOG_LEVEL; a value one of the last three cannot use is refused (exit 2).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// serverUsage is the top of `tollgate --help`: the server commands.
const serverUsage = `tollgate: an OpenAI-compatible LLM gateway that meters every token into a Postgres ledger.

Usage:
  tollgate serve   --config FILE   run gateway, meter worker and admin API in one process
                                   (embeds JetStream when TOLLGATE_NATS_URL is empty)
  tollgate gateway --config FILE   run only the LLM API (needs TOLLGATE_NATS_URL)
  tollgate meter [--config FILE]   run only the meter worker (needs TOLLGATE_NATS_URL)
  tollgate admin [--config FILE]   run only the admin API
  tollgate migrate [--down-to N]   apply the database migrations and exit (or roll back to N, 0 or more)
  tollgate demo                    create a demo customer and key on a running server,
                                   and print curl commands to try it
  tollgate config check --config FILE
                                   check a configuration file and explain what is wrong
  tollgate version                 print the build's version, revision and Go version
  tollgate NOUN VERB [flags]       administer a running server through its admin API
                                   (customers, keys, prices, credits, usage...: see below)
Each command's --help (or 'tollgate help COMMAND') shows its flags and exits 0; a bad flag
or argument exits 2.
`

// envUsage documents the environment.
const envUsage = `Environment:
  TOLLGATE_DATABASE_URL   Postgres URL (default postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable)
  TOLLGATE_NATS_URL       NATS URL; empty means serve embeds a JetStream server
  TOLLGATE_ADMIN_TOKEN    bearer token for the admin API (required for serve and admin;
                          admin commands send it)
  TOLLGATE_ADMIN_URL      admin API base URL for admin commands (default http://127.0.0.1:8081)
  TOLLGATE_LISTEN         LLM and customer API address (default :8080)
  TOLLGATE_ADMIN_LISTEN   admin API, /metrics, /healthz and /readyz address (default :8081;
                          every role serves the last three there)
  TOLLGATE_DATA_DIR       local data: the usage spool, the crash journal and the embedded JetStream
                          (default ./tollgate-data)
  TOLLGATE_SHUTDOWN_GRACE how long streams may finish after SIGTERM: a Go duration, 0 or more
                          (default 30s)
  TOLLGATE_PPROF          1 or true serves net/http/pprof under /debug/pprof/ on the admin
                          listener, without authentication (default off)
  TOLLGATE_LOG_LEVEL      debug, info, warn or error (default info; at warn only
                          failed requests are logged)
A bad TOLLGATE_SHUTDOWN_GRACE, TOLLGATE_PPROF or TOLLGATE_LOG_LEVEL stops the command (exit code 2),
as do an empty TOLLGATE_ADMIN_TOKEN for serve and admin, an empty TOLLGATE_NATS_URL for gateway and
meter, and a listen address that is not host:port; tollgate config check lists the bad values instead
(exit code 5), but not an empty admin token or NATS URL, which only some commands need.
`

func main() {
	logs := newLogBuffer(os.Stderr)
	log, err := newLogger(logs, os.Getenv("TOLLGATE_LOG_LEVEL"))
	// config check lists a bad level beside the other problems (envProblems).
	if err != nil && !asksHelp(os.Args[1:]) && !(len(os.Args) > 2 && os.Args[1] == "config" && os.Args[2] == "check") {
		fmt.Fprintln(os.Stderr, "tollgate:", err)
		os.Exit(2)
	}
	if err != nil { // help and config check log nothing that a level would hide
		log, _ = newLogger(logs, "")
	}
	// Packages that log with slog's default (the spool's and the crash
	// journal's warnings about damaged records) log as JSON too: in Go's
	// text format, a pipeline that reads JSON dropped the one sign of them.
	slog.SetDefault(log)
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
	if _, ok := serverCommands[cmd]; ok {
		go exitOnSecondSignal(ctx, log, exit)
		err = runServer(ctx, log, cmd, args, os.Stdout)
		_ = logs.Stop() // the log's lines before the error that ends the process
		exit(serverExit(cmd, err, os.Stderr))
	}
	if cmd == "config" {
		exit(configCommand(args, os.Stdout, os.Stderr))
	}
	// help, --help and the admin commands (customers, keys, ...);
	// runCLI also reports unknown commands, with exit code 2.
	code := runCLI(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	exit(code)
}

// exitOnSecondSignal waits for the first SIGINT or SIGTERM, which begins
// a server command's shutdown (ctx done), then ends the process at the
// next one that comes a second or more after it, with exit code 1,
// however long the shutdown still has (TOLLGATE_SHUTDOWN_GRACE, then
// shutdown_drain): a second Ctrl-C was swallowed, and a server kept a
// terminal, or `make run` after its script had exited, for up to 35 s at
// the defaults. Signals within the first second are the same request to
// stop: a terminal's Ctrl-C reaches both tollgate and the script that
// started it, which passes it on (scripts/run-demo.sh sends SIGTERM).
// Nothing billable is lost: as after a kill, every request still in
// flight is in the crash journal and recorded at the next start, and
// what the meter had not committed is delivered again.
func exitOnSecondSignal(ctx context.Context, log *slog.Logger, exit func(int)) {
	<-ctx.Done()
	first := time.Now()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	for s := range again {
		if time.Since(first) < time.Second {
			continue
		}
		log.Error("a second signal: exiting now, before the shutdown has finished; the requests still in flight are in the crash journal and are recorded at the next start",
			"signal", s.String())
		exit(exitError)
	}
}

// asksHelp reports whether args (the program name left out) ask only for
// help: "help …", or a -h, -help or --help flag, which every command
// answers with its usage and exit 0, whatever the environment holds.
func asksHelp(args []string) bool {
	if len(args) > 0 && args[0] == "help" {
		return true
	}
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		case "--":
			return false
		}
	}
	return false
}

// serverCommand is a command that runs or sets up a server (serve,
// gateway, meter, admin, migrate, demo), as its --help describes it.
type serverCommand struct {
	args    string // synopsis of its flags
	summary string // what it does, for --help
}

// serverCommands are the commands runServer runs, by name.
var serverCommands = map[string]serverCommand{
	"serve": {"--config FILE", "run the gateway, the meter worker and the admin API in one process; " +
		"applies the migrations first, and embeds JetStream when TOLLGATE_NATS_URL is empty"},
	"gateway": {"--config FILE", "run only the LLM API (needs TOLLGATE_NATS_URL and a migrated database)"},
	"meter":   {"[--config FILE]", "run only the meter worker (needs TOLLGATE_NATS_URL and a migrated database)"},
	"admin":   {"[--config FILE]", "run only the admin API (needs a migrated database)"},
	"migrate": {"[--down-to N]", "apply the database migrations and exit; with --down-to N, roll back to version N instead " +
		"(N must be 0 or more and below the database's version, or nothing is rolled back)"},
	"demo": {"[--admin-url URL] [--gateway-url URL] [--model MODEL] [--customer NAME]",
		"create a demo customer (reused across runs) and a new API key on a running server, and print curl commands to try it"},
}

// runServer runs the server command cmd (one of serverCommands) with its
// arguments; --help prints its usage on stdout and returns flag.ErrHelp.
func runServer(ctx context.Context, log *slog.Logger, cmd string, args []string, stdout io.Writer) error {
	switch cmd {
	case "serve":
		return runRoles(ctx, log, cmd, args, stdout, roles{gateway: true, meter: true, admin: true})
	case "gateway":
		return runRoles(ctx, log, cmd, args, stdout, roles{gateway: true})
	case "meter":
		return runRoles(ctx, log, cmd, args, stdout, roles{meter: true})
	case "admin":
		return runRoles(ctx, log, cmd, args, stdout, roles{admin: true})
	case "migrate":
		return migrate(ctx, log, args, stdout)
	case "demo":
		return demo(ctx, args, stdout, os.Getenv)
	}
	return usagef("unknown command %q", cmd)
}

// serverExit reports how the server command cmd ended, on stderr in one
// line, and returns its exit code: 0 when it succeeded or showed its
// --help; 2 (exitUsage) for a bad flag or argument, with a pointer to
// --help, and for an unusable environment variable, as for a bad
// TOLLGATE_LOG_LEVEL; 1 otherwise, the error then written as the process's
// last log line (JSON, level ERROR, with exit_code), but for demo's.
func serverExit(cmd string, err error, stderr io.Writer) int {
	var ue *usageError
	var ee *envError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "tollgate %s: %s; run 'tollgate %s --help'.\n", cmd, strings.TrimRight(ue.msg, "."), cmd)
		return exitUsage
	case errors.As(err, &ee):
		fmt.Fprintf(stderr, "tollgate %s: %v\n", cmd, err)
		return exitUsage
	}
	if cmd == "demo" { // an admin API client: its refusals exit as the admin commands' do
		fmt.Fprintf(stderr, "tollgate %s: %v\n", cmd, err)
		return exitCode(err)
	}
	// The process's last log line: JSON at ERROR, as every line before it,
	// so that a pipeline reading JSON (and an alert on the level) has it.
	slog.New(slog.NewJSONHandler(stderr, nil)).Error(fmt.Sprintf("tollgate %s: %v", cmd, err), "exit_code", exitError)
	return exitError
}

// parseServerFlags parses the server command's flags in fs (named after
// the command) from args. --help or -h prints the command's usage on
// stdout and returns flag.ErrHelp; a bad flag, or an argument that is not
// a flag, is a *usageError. The flag package itself prints nothing.
func parseServerFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, serverUsageOf(fs))
		return err
	case err != nil:
		return flagError(err)
	case fs.NArg() > 0:
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// configFlag parses --config FILE (required or not) from the arguments of
// the server command name.
func configFlag(name string, args []string, required bool, stdout io.Writer) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", "", "YAML configuration file (providers, models, seed prices)")
	if err := parseServerFlags(fs, args, stdout); err != nil {
		return "", err
	}
	if required && *path == "" {
		return "", usagef("--config FILE is required")
	}
	return *path, nil
}
