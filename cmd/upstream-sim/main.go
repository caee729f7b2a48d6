// Command upstream-sim serves the deterministic provider simulator of package
// sim (OpenAI Chat Completions, Anthropic Messages, Gemini generateContent),
// for demos, tests and benchmarks.
//
//	upstream-sim [-listen 127.0.0.1:9090] [-debug]
//
// -h prints the usage, with a summary of the per-request controls and
// fault knobs (package sim's doc has them all), and exits 0.
//
// The listen address defaults to $SIM_LISTEN, then 127.0.0.1:9090. It serves
// HTTP/1.1 and, on the same port, cleartext HTTP/2 to clients that open
// with its preface (prior knowledge, h2c); GET /stats counts the model
// requests that came over HTTP/2 (http2_requests). SIGINT or
// SIGTERM shuts it down gracefully: in-flight requests get shutdownTimeout to
// finish, then their connections are closed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// usageText heads -h's flag list: what the simulator serves and where
// its rules and per-request controls are described.
const usageText = `Usage: upstream-sim [-listen ADDR] [-debug]

A deterministic provider (OpenAI, Anthropic, Gemini) for demos, tests and
benchmarks: GET /v1/models, POST /v1/chat/completions, /v1/messages,
/v1beta/models/{model}:generateContent, ...; GET /stats is what it billed.
Per request, metadata (or X-Sim-* headers) sets sim_delay_ms, sim_chunks,
sim_status, sim_fault (error_after:N, disconnect_after:N, stall, no_usage,
...); under /d/{name}/ a deployment of its own, failed at will with
POST /d/{name}/faults {"fail_all":true,"status":503}. Every rule and knob:
go doc ./cmd/upstream-sim/sim (cmd/upstream-sim/sim/doc.go).

Flags:
`

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "upstream-sim:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("upstream-sim", flag.ContinueOnError)
	listen := fs.String("listen", envOr("SIM_LISTEN", "127.0.0.1:9090"), "address to listen on (env SIM_LISTEN)")
	debug := fs.Bool("debug", false, "log every model request")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage is printed; -h asks for nothing else
		}
		return err
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           sim.New(sim.WithLogger(log)),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		Protocols:         &protocols,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("upstream-sim listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("graceful shutdown incomplete, closing connections", "err", err)
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
