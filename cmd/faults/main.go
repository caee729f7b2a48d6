// Command faults is Tollgate's fault-injection suite (`make faults`) and
// soak test (`make soak`). It builds tollgate and upstream-sim, runs its own
// Postgres cluster (initdb into a temporary directory, random port), its
// own NATS process (this binary, re-executed as `faults natsd`),
// upstream-sim, a meter worker (two after the first is killed), a gateway
// and an admin API, and drives chat completions through the gateway while
// it restarts NATS, stops Postgres for 10s, kill -9s a meter worker and a
// gateway (spool recovery), kill -9s the gateway with 50 streams and more
// in flight and the moment a client has read [DONE] (crash-journal
// recovery), and injects poison from the client, the upstream, foreign
// publishers and the spool, with client disconnects, upstream errors,
// upstream disconnects and stalls in the mix; and sends a model of two
// deployments traffic while one of them fails every request (its attempts
// retried on the other, recorded not charged, the ledger held to
// upstream-sim deployment by deployment).
//
// Afterwards every request upstream-sim saw must have exactly one event,
// every request that completed must have its X-Request-Id in the ledger,
// the ledger must match what upstream-sim billed, token class by token
// class, wherever that can be exact (everywhere but the requests in flight
// at a kill, whose usage is estimated: what they leave unbilled must stay
// within 5%), each poison event must be in the ledger with its corrections
// or in the dead-letter stream with its reason, with no event id twice and
// a clean reconciliation. It prints one row per fault and exits 1 on any
// discrepancy.
//
//	go run ./cmd/faults [-requests 5250] [-concurrency 32] [-keep] [-only REGEXP] [-seed N]
//	go run ./cmd/faults -soak 10m [-rate 40] [-sample 30s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"syscall"
	"time"
)

var began = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "natsd" {
		os.Exit(natsdMain(os.Args[2:]))
	}
	requests := flag.Int("requests", 5250, "requests across the fault phases")
	conc := flag.Int("concurrency", 32, "requests in flight at most")
	soak := flag.Duration("soak", 0, "soak mode: steady load for this long, sampling memory (e.g. 10m)")
	rate := flag.Float64("rate", 40, "soak mode: requests per second")
	sample := flag.Duration("sample", 30*time.Second, "soak mode: sampling interval")
	keep := flag.Bool("keep", false, "keep the temporary directory (logs, data) after the run")
	only := flag.String("only", "", "run only the phases whose name matches this regular expression")
	seed := flag.Int64("seed", 0, "draw the load from this seed (a run's requests follow from it and the phases run)")
	flag.Parse()
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults: -only:", err)
			os.Exit(2)
		}
		phases = slices.DeleteFunc(phases, func(ph phase) bool { return !re.MatchString(ph.name) })
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root, err := os.MkdirTemp("", "tollgate-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	s := &stack{root: root, self: self, ps: &procs{dir: root}}
	ok := false
	func() {
		defer s.down() // always: even when a step failed or we were interrupted
		if err := s.up(ctx, 1); err != nil {
			logf("setup failed: %v", err)
			return
		}
		s.loader = newLoader(s.gwAddr, s.key, maxConcurrency(*conc))
		s.loader.seq.Store(*seed << 32)
		if *soak > 0 {
			ok = s.soak(ctx, *soak, *rate, *conc, *sample)
		} else {
			ok = s.faults(ctx, *requests, *conc)
		}
	}()
	stop()
	if *keep || !ok {
		logf("logs and data kept in %s", root)
	} else {
		os.RemoveAll(root)
	}
	if !ok {
		os.Exit(1)
	}
}

// totalShare sums the shares of every phase, taken before -only leaves
// some out, so that a phase runs at the same pace either way.
var totalShare = func() (t float64) {
	for _, ph := range phases {
		t += ph.share
	}
	return t
}()

// faults runs the phases, then the final checks, and prints the report.
func (s *stack) faults(ctx context.Context, requests, conc int) bool {
	var rows []row
	for _, ph := range phases {
		if ctx.Err() != nil {
			return false
		}
		logf("phase: %s", ph.name)
		rows = append(rows, s.runPhase(ctx, ph, int(float64(requests)*ph.share/totalShare), conc))
	}
	return s.report(ctx, rows, nil)
}

// maxConcurrency is the most requests any phase has in flight: the
// loader's connection pool must hold that many.
func maxConcurrency(conc int) int {
	for _, ph := range phases {
		conc = max(conc, ph.conc)
	}
	return conc
}
