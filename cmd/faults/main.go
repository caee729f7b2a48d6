// Command faults is Tollgate's fault-injection suite (`make faults`) and
// soak test (`make soak`). It builds tollgate and upstream-sim, runs its own
// Postgres cluster (initdb into a temporary directory, random port), its
// own NATS process (this binary, re-executed as `faults natsd`),
// upstream-sim, a meter worker (two after the first is killed), a gateway and an admin API, and drives
// chat completions through the gateway while it restarts NATS, stops
// Postgres for 10s, kill -9s a meter worker and a gateway (spool recovery),
// with client disconnects, upstream errors, upstream disconnects and stalls
// in the mix. Afterwards the ledger must match what upstream-sim billed,
// token class by token class, with no event id twice and a clean
// reconciliation. It prints one row per fault and exits 1 on any
// discrepancy.
//
//	go run ./cmd/faults [-requests 3000] [-concurrency 32] [-keep]
//	go run ./cmd/faults -soak 10m [-rate 40] [-sample 30s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
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
	requests := flag.Int("requests", 3000, "requests across the fault phases")
	conc := flag.Int("concurrency", 32, "requests in flight at most")
	soak := flag.Duration("soak", 0, "soak mode: steady load for this long, sampling memory (e.g. 10m)")
	rate := flag.Float64("rate", 40, "soak mode: requests per second")
	sample := flag.Duration("sample", 30*time.Second, "soak mode: sampling interval")
	keep := flag.Bool("keep", false, "keep the temporary directory (logs, data) after the run")
	flag.Parse()

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
		s.loader = newLoader(s.gwAddr, s.key, *conc)
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

// faults runs the phases, then the final checks, and prints the report.
func (s *stack) faults(ctx context.Context, requests, conc int) bool {
	totalShare := 0.0
	for _, ph := range phases {
		totalShare += ph.share
	}
	var rows []row
	for _, ph := range phases {
		if ctx.Err() != nil {
			return false
		}
		logf("phase: %s", ph.name)
		rows = append(rows, s.runPhase(ctx, ph, int(float64(requests)*ph.share/totalShare), conc))
	}
	return s.report(ctx, rows, 0)
}

// final is the whole run: every ledger event against upstream-sim's
// counters since the stack started.
func (s *stack) final(ctx context.Context) (row, integrity, error) {
	tot := row{name: "TOTAL (whole run)"}
	st, err := s.simQuiet(ctx, 60*time.Second)
	if err != nil {
		return tot, integrity{}, err
	}
	tot.sim = simTally(st)
	if err := s.settle(ctx, time.Time{}, time.Time{}, tot.sim.requests, 120*time.Second); err != nil {
		return tot, integrity{}, err
	}
	if tot.ledger, err = s.ledgerTally(ctx, time.Time{}, time.Time{}); err != nil {
		return tot, integrity{}, err
	}
	tot.disc = tot.ledger.discrepancy(tot.sim)
	in, err := s.checkIntegrity(ctx, began)
	return tot, in, err
}

// report prints the table and the final checks; it returns whether all
// passed.
func (s *stack) report(ctx context.Context, rows []row, sent int64) bool {
	tot, in, err := s.final(ctx)
	tot.sent = sent
	for _, r := range rows {
		tot.sent, tot.failed, tot.spooled = tot.sent+r.sent, tot.failed+r.failed, tot.spooled+r.spooled
		tot.redelivered, tot.dups, tot.took = tot.redelivered+r.redelivered, tot.dups+r.dups, tot.took+r.took
	}
	ok := err == nil
	w := tabwriter.NewWriter(os.Stdout, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "fault\tsent\tin flight\tspooled\tredelivered\tdups refused\tsim requests\tledger events\tdiscrepancy\ttime\t")
	for _, r := range append(rows, tot) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.name, r.sent, r.inflight, r.spooled,
			r.redelivered, r.dups, r.sim.requests, r.ledger.requests, r.disc, r.took.Round(100*time.Millisecond))
		ok = ok && r.err == nil && r.disc == 0
	}
	w.Flush()
	fmt.Println()
	for _, r := range append(rows, tot) {
		if r.note != "" {
			fmt.Printf("%s: %s\n", r.name, r.note)
		}
		if r.disc != 0 {
			fmt.Printf("%s: DISCREPANCY: upstream-sim billed %s; the ledger holds %s\n", r.name, r.sim, r.ledger)
		}
		if r.err != nil {
			fmt.Printf("%s: ERROR: %v\n", r.name, r.err)
		}
		if r.failed > 0 {
			fmt.Printf("%s: %d requests got no complete answer (upstream disconnects are forwarded as broken streams)\n", r.name, r.failed)
		}
	}
	if err != nil {
		fmt.Println("final checks: ERROR:", err)
		return false
	}
	check := func(name string, pass bool, detail string) {
		mark := "ok  "
		if !pass {
			mark, ok = "FAIL", false
		}
		fmt.Printf("%s %s: %s\n", mark, name, detail)
	}
	check("ground truth", tot.disc == 0, fmt.Sprintf("upstream-sim %s", tot.sim))
	if st, err := s.simStats(ctx); err == nil {
		r := st.Requests
		fmt.Printf("     upstream-sim outcomes: ok %d, stream_error %d, disconnected %d, stalled %d, canceled %d, status %d, bad_request %d\n",
			r.OK, r.StreamError, r.Disconnected, r.Stalled, r.Canceled, r.Status, r.BadRequest)
	}
	fmt.Printf("     ledger events by status and usage_source: %s\n", strings.TrimSuffix(in.byStatus, "; "))
	check("no event id twice", in.duplicateIDs == 0 && in.events == in.eventIDs,
		fmt.Sprintf("%d ids stored more than once; %d events, %d dedupe keys", in.duplicateIDs, in.events, in.eventIDs))
	check("rollups = events", in.rollups == tot.ledger, fmt.Sprintf("usage_hourly %s", in.rollups))
	check("admin usage = ground truth", in.admin == tot.sim, fmt.Sprintf("GET /admin/v1/usage %s", in.admin))
	check("reconciliation clean", in.reconClean, in.recon)
	depth := spoolDepth(filepath.Join(s.gwData, "spool"))
	check("gateway spool drained", depth == 0, fmt.Sprintf("%d events left", depth))
	lost := 0
	_ = scanFile(s.gw.log, 0, -1, func(line string) bool {
		if strings.Contains(line, `"usage event not published"`) {
			lost++
		}
		return true
	})
	check("no event refused by publisher and spool", lost == 0, fmt.Sprintf("%d \"usage event not published\" log lines", lost))
	return ok
}
