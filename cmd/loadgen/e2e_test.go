//go:build loadgen_e2e

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEndToEnd builds upstream-sim and tollgate, starts the four targets
// as processes (each tollgate on a fresh Postgres database with embedded
// JetStream, tollgate-h2c reaching the simulator over cleartext HTTP/2),
// runs one short interleaved round on each, checks every figure is there
// and every gateway request reached its ledger, then holds a few idle
// streams open on the proxy and on both gateways.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the whole stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"-targets", "sim,proxy,tollgate,tollgate-h2c", "-concurrency", "4", "-chunks", "20", "-duration", "1500ms",
		"-rounds", "1", "-warmup", "300ms", "-keep-logs=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("progress:\n%s", log.String())
		}
	}()
	st, err := startStack(ctx, cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	tg, th := st.gw(targetTollgate), st.gw(targetTollgateH2C)
	if tg == nil || th == nil {
		t.Fatalf("gateways %v", st.gws)
	}
	defer func() {
		st.close()
		for _, c := range []*child{st.sim, st.proxy, tg.child, th.child} {
			select {
			case <-c.done:
			default:
				t.Errorf("%s still running after close", c.name)
			}
		}
		if _, err := os.Stat(st.dir); !os.IsNotExist(err) {
			t.Errorf("temporary directory %s left behind", st.dir)
		}
	}()
	for _, g := range []*gatewayProc{tg, th} {
		if g.dbName == "" || g.key == "" || g.customerID == "" || g.child == nil {
			t.Fatalf("%s set-up incomplete: db %q key %q customer %q", g.target, g.dbName, g.key, g.customerID)
		}
	}
	if tg.dbName == th.dbName {
		t.Fatal("the two gateways share a database")
	}

	r := newRunner(cfg, st, &log)
	totals, all, err := r.runRounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("%d windows, want 4", len(all))
	}
	for _, tg := range cfg.targets {
		w := totals[tg]
		if w.reqs == 0 || w.ok != w.reqs || len(w.errs) > 0 {
			t.Errorf("%s: %d requests, %d ok, errors %v", tg, w.reqs, w.ok, w.errs)
		}
		if w.chunks != 20*w.ok {
			t.Errorf("%s: %d chunks for %d requests of 20", tg, w.chunks, w.ok)
		}
		if w.ttft.count() != w.ok || w.ttft.quantile(.5) <= 0 || w.gap.count() != 19*w.ok {
			t.Errorf("%s: %d TTFT samples (p50 %v), %d gaps", tg, w.ttft.count(), w.ttft.quantile(.5), w.gap.count())
		}
		if c, ok := w.cpu[tg]; !ok || c <= 0 {
			t.Errorf("%s: no CPU time for its own process (%v)", tg, w.cpu)
		}
	}
	for _, g := range []string{targetTollgate, targetTollgateH2C} {
		tw := totals[g]
		if tw.ledger != nil || !tw.ledgerOK || tw.ledgerN != r.expected[g] || r.expected[g] < tw.ok {
			t.Errorf("%s ledger: %d of %d expected (%v)", g, tw.ledgerN, r.expected[g], tw.ledger)
		}
		if tw.cpuSpan < tw.elapsed {
			t.Errorf("%s CPU window %v shorter than its load window %v", g, tw.cpuSpan, tw.elapsed)
		}
	}
	// Every request of tollgate-h2c, and only those, reached the simulator over HTTP/2.
	if n, _, err := simHTTP2(ctx, st.simURL); err != nil || n != r.expected[targetTollgateH2C] {
		t.Errorf("the simulator saw %d requests over HTTP/2 (%v), want tollgate-h2c's %d", n, err, r.expected[targetTollgateH2C])
	}

	var out bytes.Buffer
	printReport(&out, cfg, totals, all)
	report := out.String()
	for _, want := range []string{"chunks/s × proxy", "+TTFT p50 vs proxy", "CPU s/1M chunks", "pg db",
		"Ledger (tollgate, upstream over HTTP/1.1): every request answered 200", "Ledger (tollgate-h2c, upstream over h2c): every request"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, tg := range []string{"sim", "proxy", "tollgate", "tollgate-h2c"} {
		if !regexp.MustCompile(`(?m)^ *` + tg + ` +\d`).MatchString(report) {
			t.Errorf("report lacks a row for %s:\n%s", tg, report)
		}
	}
	t.Logf("report:\n%s", report)

	// The same deployment, as an external one given by URL: no processes
	// of loadgen's own, so no CPU figures, but the ledger is still checked.
	xcfg, err := parseFlags([]string{"-targets", "sim,tollgate", "-concurrency", "2", "-chunks", "5",
		"-requests", "20", "-rounds", "1", "-warmup", "0", "-sim-url", st.simURL, "-gateway-url", tg.url,
		"-key", tg.key, "-admin-url", tg.adminURL, "-admin-token", st.adminToken, "-customer-id", tg.customerID}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	xst, err := startStack(ctx, xcfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	if xst.sim != nil || xst.proxy != nil || xst.gw(targetTollgate).child != nil || len(xst.dbNames()) != 0 {
		t.Error("an external deployment must not start anything")
	}
	xr := newRunner(xcfg, xst, &log)
	xtotals, _, err := xr.runRounds(ctx)
	xst.close()
	if err != nil {
		t.Fatal(err)
	}
	// loadgen's own CPU is measured (in 10 ms ticks, so 20 fast requests may
	// well read 0), and nobody else's: loadgen started no process.
	_, measured := xtotals["tollgate"].cpu["loadgen"]
	if w := xtotals["tollgate"]; w.ok != 20 || !w.ledgerOK || len(w.cpu) != 1 || !measured || w.cpu["loadgen"] < 0 {
		t.Errorf("external tollgate: %d ok of 20, ledger ok %v (%d, %v), cpu %v", w.ok, w.ledgerOK, w.ledgerN, w.ledger, w.cpu)
	}
	r.expected[targetTollgate] = xr.expected[targetTollgate]

	// Idle mode, briefly.
	icfg := *cfg
	icfg.targets = []string{"proxy", "tollgate", "tollgate-h2c"}
	icfg.streams, icfg.openParallel, icfg.openTimeout, icfg.idleSettle = 30, 10, 30*time.Second, 200*time.Millisecond
	rs, err := runIdle(ctx, &icfg, st, &log, r.expected)
	if err != nil {
		t.Fatal(err)
	}
	for _, ir := range rs {
		// Two descriptors per stream (client and upstream connections;
		// the upstream ones may be the warm-up's, open before), but over
		// h2c the streams share one upstream connection.
		fdsOK := ir.fds >= 60
		if ir.target == targetTollgateH2C {
			added := ir.fds - ir.fdsBefore
			fdsOK = added >= 30 && added <= 40
		}
		if ir.open != 30 || ir.failed != 0 || ir.rss <= 0 || !fdsOK || !ir.rt.ok || ir.rt.goroutines < 30 {
			t.Errorf("idle %s: %d open, %d failed %v, RSS %d, fds %d (%d before), runtime %+v",
				ir.target, ir.open, ir.failed, ir.errs, ir.rss, ir.fds, ir.fdsBefore, ir.rt)
		}
	}
	for _, ir := range rs[1:] {
		if !ir.verified || ir.upstream != upstreamMode(ir.target) {
			t.Errorf("idle %s (upstream %s): ledger %d of %d (%v)", ir.target, ir.upstream, ir.ledgerN, ir.expect, ir.ledger)
		}
	}
	out.Reset()
	printIdle(&out, rs)
	t.Logf("idle:\n%s", out.String())
}

// TestSplitEndToEnd runs tollgate-split (a nats-server, `tollgate admin`,
// `tollgate meter` and `tollgate gateway`, each a process) for one short
// round beside the proxy: every request reaches the ledger through the
// meter process, the gateway's CPU is its own process's, the other three
// are reported beside it, and close stops all four.
func TestSplitEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the whole stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"-targets", "proxy,tollgate-split", "-concurrency", "4", "-chunks", "20", "-duration", "1500ms",
		"-rounds", "1", "-warmup", "300ms", "-keep-logs=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("progress:\n%s", log.String())
		}
	}()
	st, err := startStack(ctx, cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	g := st.gw(targetTollgateSplit)
	if g == nil || g.child == nil || st.split == nil || st.split.nats == nil || st.split.meter == nil || st.split.admin == nil {
		st.close()
		t.Fatalf("split set-up incomplete: %+v %+v", g, st.split)
	}
	procs := []*child{g.child, st.split.nats, st.split.meter, st.split.admin}
	defer func() {
		st.close()
		for _, c := range procs {
			select {
			case <-c.done:
			default:
				t.Errorf("%s still running after close", c.name)
			}
		}
	}()
	pids := map[int]bool{}
	for _, c := range procs {
		pids[c.pid] = true
	}
	if len(pids) != 4 || st.pid(targetTollgateSplit) != g.child.pid || st.pid(splitMeter) != st.split.meter.pid {
		t.Fatalf("the split target's processes are not four of their own: %v", pids)
	}

	r := newRunner(cfg, st, &log)
	totals, all, err := r.runRounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := totals[targetTollgateSplit]
	if w.reqs == 0 || w.ok != w.reqs || w.chunks != 20*w.ok {
		t.Errorf("tollgate-split: %d requests, %d ok, %d chunks, errors %v", w.reqs, w.ok, w.chunks, w.errs)
	}
	if w.ledger != nil || !w.ledgerOK || w.ledgerN != r.expected[targetTollgateSplit] || r.expected[targetTollgateSplit] < w.ok {
		t.Errorf("tollgate-split ledger: %d of %d expected (%v)", w.ledgerN, r.expected[targetTollgateSplit], w.ledger)
	}
	for _, role := range []string{targetTollgateSplit, splitNATS, splitMeter} {
		if c, ok := w.cpu[role]; !ok || c <= 0 {
			t.Errorf("%s: no CPU time (%v)", role, w.cpu)
		}
	}
	if _, ok := w.cpu[splitAdmin]; !ok {
		t.Errorf("split-admin: not measured (%v)", w.cpu)
	}
	var out bytes.Buffer
	printReport(&out, cfg, totals, all)
	report := out.String()
	if !strings.Contains(report, "split-nats") || !strings.Contains(report, "Ledger (tollgate-split, upstream over HTTP/1.1): every request answered 200") ||
		!regexp.MustCompile(`(?m)^ *tollgate-split +\d`).MatchString(report) {
		t.Errorf("report:\n%s", report)
	}
	t.Logf("report:\n%s", report)
}
