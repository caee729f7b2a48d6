package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// demo seeds a running server with a demo customer (reused across runs)
// and a fresh API key, and prints curl commands that use them on stdout.
// It reads TOLLGATE_ADMIN_URL and TOLLGATE_ADMIN_TOKEN through getenv, as
// the admin commands do: --admin-url wins over TOLLGATE_ADMIN_URL. The
// LLM API it prints is --gateway-url, else the address TOLLGATE_LISTEN
// gives `tollgate serve` (listenURL).
func demo(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	adminURL := fs.String("admin-url", orDefault(getenv("TOLLGATE_ADMIN_URL"), defaultAdminURL), "admin API base URL (env TOLLGATE_ADMIN_URL)")
	gatewayURL := fs.String("gateway-url", listenURL(orDefault(getenv("TOLLGATE_LISTEN"), ":8080")), "LLM API base URL (env TOLLGATE_LISTEN, as serve listens on it)")
	model := fs.String("model", "sim-pro", "model for the example request")
	name := fs.String("customer", "demo", "demo customer name")
	if err := parseServerFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := checkAdminURL(*adminURL); err != nil {
		return err
	}
	token := getenv("TOLLGATE_ADMIN_TOKEN")
	// The admin commands' hints for the same errors (cli.fail): demo has
	// no --token, and its admin URL is not TOLLGATE_ADMIN_LISTEN's.
	defer func() {
		switch exitCode(err) {
		case exitUnauthorized:
			if token == "" {
				err = fmt.Errorf("%w; TOLLGATE_ADMIN_TOKEN is not set: export it (the server's admin token)", err)
			}
		case exitUnreachable:
			err = fmt.Errorf("%w; %s", err, unreachableHint)
		}
	}()
	c := api.NewClient(*adminURL, token, nil)
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		return err
	}
	existing, err := c.Customers(ctx, *name)
	if err != nil {
		return err
	}
	var customerID string
	if len(existing) > 0 {
		customerID = existing[0].ID
	} else {
		created, err := c.CreateCustomer(ctx, ledger.CustomerInput{Name: *name})
		if err != nil {
			return err
		}
		customerID = created.ID
	}
	key, err := c.CreateKey(ctx, customerID, ledger.KeyInput{Name: "demo " + time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `
Tollgate is running. Demo customer %s, new API key %s

Stream a chat completion through the gateway (usage is metered whether or not you ask for it):

  curl -N %s/v1/chat/completions \
    -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
    -d '{"model":"%s","stream":true,"stream_options":{"include_usage":true},"max_tokens":24,"metadata":{"sim_delay_ms":"80"},"messages":[{"role":"user","content":"Say hello to the ledger"}]}'

Then see what it cost, from the ledger:

  curl -s '%s/admin/v1/usage?customer_id=%s&group_by=model' -H 'Authorization: Bearer %s'

`, customerID, key.Secret, *gatewayURL, key.Secret, *model, *adminURL, customerID, token)
	return nil
}

// listenURL is the base URL a client on this machine reaches a listen
// address at (TOLLGATE_LISTEN's syntax, net.Listen's): ":9090" and
// "0.0.0.0:9090" are http://127.0.0.1:9090, "[::]:9090" http://[::1]:9090,
// a named host is kept, a service name port is its number (":http" is
// 80), and an IPv6 zone is escaped as a URL needs ("%25"). An address
// that does not split is returned after "http://" as it is, for the
// request to fail on.
func listenURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	if n, err := net.LookupPort("tcp", port); err == nil {
		port = strconv.Itoa(n)
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}).String()
}
