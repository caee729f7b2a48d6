package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// maxUnbilled is the most of what upstream-sim billed for the requests in
// flight at the kills that the ledger may miss: 5%.
const maxUnbilled = 0.05

// whole is the whole run, next to upstream-sim's counters since the stack
// started, and the part of it that must match them exactly.
type whole struct {
	row
	exactSim, exactLedger tally // the run without the kill phases' tokens and the poison
	gap                   int64 // requestGap of the whole run
	in                    integrity
}

// final measures the whole run. Every request upstream-sim saw has an
// event, whatever happened, so the request counts must match exactly.
// Tokens cannot all match: the requests in flight at a kill were recorded
// from the crash journal with estimated usage. So the exact comparison
// leaves out the tokens (not the requests) of the kill phases, whose
// crashed part is bounded by the unbilled share instead, and the poison
// requests, which are checked one by one (a NUL served model or negative
// counts reported upstream are meant to differ from what upstream-sim
// billed).
func (s *stack) final(ctx context.Context, rows []row) (whole, error) {
	w := whole{row: row{name: "TOTAL (whole run)"}}
	st, err := s.simQuiet(ctx, 60*time.Second)
	if err != nil {
		return w, err
	}
	w.sim = simTally(st)
	if err := s.settle(ctx, time.Time{}, time.Time{}, w.sim.requests, 120*time.Second); err != nil {
		return w, err
	}
	p, err := s.ledgerSplit(ctx, time.Time{}, time.Time{}, nil)
	if err != nil {
		return w, err
	}
	w.ledger, w.recovered, w.unanswered = p.all, p.crashed, p.unanswered
	var exclude []string
	w.exactSim = w.sim
	for _, r := range rows {
		exclude = append(exclude, r.exclude...)
		w.exactSim = w.exactSim.sub(r.simPoison)
		if r.kill {
			w.exactSim = w.exactSim.sub(tokensOf(r.sim))
		}
	}
	if w.exactLedger, err = s.ledgerTally(ctx, time.Time{}, time.Time{}, exclude...); err != nil {
		return w, err
	}
	for _, r := range rows {
		if r.kill {
			w.exactLedger = w.exactLedger.sub(tokensOf(r.ledger))
		}
	}
	w.gap = requestGap(w.sim.requests, p)
	w.disc = tokensOf(w.exactLedger).discrepancy(tokensOf(w.exactSim)) + w.gap
	w.in, err = s.checkIntegrity(ctx, began)
	return w, err
}

// tokensOf is t without its request count.
func tokensOf(t tally) tally { return tally{0, t.prompt, t.cached, t.completion, t.reasoning} }

// report prints the table and the final checks; it returns whether all
// passed. soak is the soak's load, when there are no phases.
func (s *stack) report(ctx context.Context, rows []row, soak *run) bool {
	w, err := s.final(ctx, rows)
	tot := &w.row
	if soak != nil && err == nil {
		tot.sent, tot.completed = soak.sent.Load(), int64(len(soak.completed))
		tot.missing, err = s.missing(ctx, soak.completed)
	}
	for _, r := range rows {
		tot.kill = tot.kill || r.kill
		tot.sent, tot.failed, tot.spooled = tot.sent+r.sent, tot.failed+r.failed, tot.spooled+r.spooled
		tot.redelivered, tot.dups, tot.took = tot.redelivered+r.redelivered, tot.dups+r.dups, tot.took+r.took
		tot.completed, tot.missing, tot.probes = tot.completed+r.completed, append(tot.missing, r.missing...), append(tot.probes, r.probes...)
		if r.kill {
			tot.truth += r.truth
		}
	}
	ok := err == nil
	printTable(append(rows, *tot))
	for _, r := range rows {
		ok = r.print() && ok
	}
	if tot.failed > 0 {
		fmt.Printf("%s: %d requests got no complete answer\n", tot.name, tot.failed)
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
	in := w.in
	check("one event per upstream request", w.gap == 0,
		fmt.Sprintf("upstream-sim saw %d requests; the ledger holds %d events of the load's customer, %d of them crashed (recovered from the journal), "+
			"%d of those with nothing billed as the gateway died before the upstream answered (upstream-sim may never have received those: it saw %d of them)",
			w.sim.requests, w.ledger.requests, w.recovered.requests, w.unanswered, w.sim.requests-(w.ledger.requests-w.unanswered)))
	check("ground truth (exact part)", tokensOf(w.exactSim) == tokensOf(w.exactLedger), fmt.Sprintf("upstream-sim %s; the ledger %s "+
		"(the tokens of the kill phases, estimated for the requests in flight, are bounded by the unbilled check instead; the poison requests are checked one by one)",
		w.exactSim, w.exactLedger))
	if share, over, has := tot.unbilled(); has {
		check("unbilled at the kills <= 5%", share <= maxUnbilled, fmt.Sprintf("%.2f%% of the %d tokens upstream-sim billed for the requests in flight; the crashed events hold %d, %d over",
			100*share, tot.truth, tot.recovered.tokens(), over))
	}
	check("completed requests in the ledger", len(tot.missing) == 0, fmt.Sprintf("%d of %d X-Request-Ids missing %v", len(tot.missing), tot.completed, clipIDs(tot.missing)))
	if len(tot.probes) > 0 {
		lost := 0
		for _, id := range tot.probes {
			if strings.Contains(strings.Join(tot.missing, " "), id) {
				lost++
			}
		}
		check("kill -9 after [DONE]", lost == 0, fmt.Sprintf("%d of %d streams read to [DONE] before the kill are in the ledger", len(tot.probes)-lost, len(tot.probes)))
	}
	if st, err := s.simStats(ctx); err == nil {
		r := st.Requests
		fmt.Printf("     upstream-sim outcomes: ok %d, stream_error %d, disconnected %d, stalled %d, canceled %d, status %d, bad_request %d\n",
			r.OK, r.StreamError, r.Disconnected, r.Stalled, r.Canceled, r.Status, r.BadRequest)
	}
	fmt.Printf("     ledger events by status and usage_source (every customer): %s\n", strings.TrimSuffix(in.byStatus, "; "))
	check("no event id twice", in.duplicateIDs == 0 && in.events+in.attempts == in.eventIDs,
		fmt.Sprintf("%d ids stored more than once; %d events and %d attempts not charged, %d dedupe keys", in.duplicateIDs, in.events,
			in.attempts, in.eventIDs))
	check("rollups = events", in.rollups == in.allEvents, fmt.Sprintf("usage_hourly %s; usage_events %s (every customer)", in.rollups, in.allEvents))
	// The admin API reads the rollups: it must give the ledger's figures
	// exactly. They cannot equal upstream-sim's (crashed estimates,
	// poison): the ledger is held to upstream-sim by the checks above.
	check("admin usage = ledger", in.admin == w.ledger.sub(in.loadAttempts), fmt.Sprintf("GET /admin/v1/usage %s (the ledger's "+
		"attempts not charged, %d, are in no rollup)", in.admin, in.loadAttempts.requests))
	for _, r := range rows {
		for _, c := range r.checks {
			check(r.name+": "+c.name, c.pass, c.detail)
		}
	}
	check("reconciliation clean", in.reconClean, in.recon)
	depth := spoolDepth(filepath.Join(s.gwData, "spool"))
	check("gateway spool drained", depth == 0, fmt.Sprintf("%d events left", depth))
	lost, setAside := 0, 0
	_ = scanFile(s.gw.log, 0, -1, func(line string) bool {
		switch {
		case strings.Contains(line, `"usage event not published`):
			lost++
		case strings.Contains(line, `"usage event set aside for the dead-letter stream"`):
			setAside++
		}
		return true
	})
	check("no event refused by publisher and spool", lost == 0 && setAside == 0,
		fmt.Sprintf("%d \"usage event not published\" and %d \"set aside for the dead-letter stream\" log lines", lost, setAside))
	if len(s.poison) > 0 {
		for _, c := range s.checkPoison(ctx) {
			check(c.name, c.pass, c.detail)
		}
	}
	return ok
}

// printTable prints one line per row.
func printTable(rows []row) {
	w := tabwriter.NewWriter(os.Stdout, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "fault\tsent\tin flight\tspooled\tredelivered\tdups refused\tsim requests\tledger events\tdiscrepancy\tcompleted missing\trecovered\tunbilled\ttime\t")
	for _, r := range rows {
		unbilled := "-"
		if share, _, ok := r.unbilled(); ok {
			unbilled = fmt.Sprintf("%.2f%%", 100*share)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.name, r.sent, r.inflight, r.spooled,
			r.redelivered, r.dups, r.sim.requests, r.ledger.requests, r.disc, len(r.missing), r.recovered.requests, unbilled,
			r.took.Round(100*time.Millisecond))
	}
	w.Flush()
	fmt.Println("(kill phases: the discrepancy counts requests only, their tokens are bounded by unbilled; poison is left out of both sides)")
	fmt.Println()
}

// print prints a row's notes and problems; it returns whether the row passed.
func (r *row) print() bool {
	if r.note != "" {
		fmt.Printf("%s: %s\n", r.name, r.note)
	}
	ok := r.err == nil && r.disc == 0 && len(r.missing) == 0
	if share, over, has := r.unbilled(); has {
		fmt.Printf("%s: upstream-sim billed %d tokens for the requests in flight at the kills; the %d crashed events hold %d: %.2f%% unbilled, %d over-billed; "+
			"%d crashed with nothing billed (upstream-sim received %d of them)\n",
			r.name, r.truth, r.recovered.requests, r.recovered.tokens(), 100*share, over, r.unanswered, r.sim.requests-(r.ledger.requests-r.unanswered))
		fmt.Printf("%s: %s\n", r.name, r.diag)
		ok = ok && share <= maxUnbilled
	}
	if r.disc != 0 {
		fmt.Printf("%s: DISCREPANCY: upstream-sim billed %s; the ledger holds %s\n", r.name, r.sim, r.ledger)
	}
	if len(r.missing) > 0 {
		fmt.Printf("%s: %d of %d completed requests have no event: %v\n", r.name, len(r.missing), r.completed, clipIDs(r.missing))
	}
	if r.err != nil {
		fmt.Printf("%s: ERROR: %v\n", r.name, r.err)
	}
	if r.failed > 0 {
		fmt.Printf("%s: %d requests got no complete answer (upstream disconnects are forwarded as broken streams; a killed gateway breaks its streams and refuses connections until it is back)\n", r.name, r.failed)
	}
	return ok
}

// clipIDs shows at most five ids.
func clipIDs(ids []string) []string {
	if len(ids) > 5 {
		return append(ids[:5:5], fmt.Sprintf("and %d more", len(ids)-5))
	}
	return ids
}
