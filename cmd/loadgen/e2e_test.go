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

// TestEndToEnd builds upstream-sim and tollgate, starts the three targets
// as processes (tollgate on a fresh Postgres database with embedded
// JetStream), runs one short interleaved round on each, checks every
// figure is there and every gateway request reached the ledger, then holds
// a few idle streams open on the proxy and on tollgate.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the whole stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"-concurrency", "4", "-chunks", "20", "-duration", "1500ms",
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
	dbName := st.dbName
	defer func() {
		st.close()
		for _, c := range []*child{st.sim, st.proxy, st.gateway} {
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
	if dbName == "" || st.key == "" || st.customerID == "" {
		t.Fatalf("tollgate set-up incomplete: db %q key %q customer %q", dbName, st.key, st.customerID)
	}

	r := newRunner(cfg, st, &log)
	totals, all, err := r.runRounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("%d windows, want 3", len(all))
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
	tw := totals["tollgate"]
	if tw.ledger != nil || !tw.ledgerOK || tw.ledgerN != r.expected || r.expected < tw.ok {
		t.Errorf("ledger: %d of %d expected (%v)", tw.ledgerN, r.expected, tw.ledger)
	}
	if tw.cpuSpan < tw.elapsed {
		t.Errorf("tollgate CPU window %v shorter than its load window %v", tw.cpuSpan, tw.elapsed)
	}

	var out bytes.Buffer
	printReport(&out, cfg, totals, all)
	report := out.String()
	for _, want := range []string{"chunks/s × proxy", "+TTFT p50 vs proxy", "CPU s/1M chunks", "pg db",
		"Ledger: every tollgate request answered 200"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, tg := range []string{"sim", "proxy", "tollgate"} {
		if !regexp.MustCompile(`(?m)^ *` + tg + ` +\d`).MatchString(report) {
			t.Errorf("report lacks a row for %s:\n%s", tg, report)
		}
	}
	t.Logf("report:\n%s", report)

	// The same deployment, as an external one given by URL: no processes
	// of loadgen's own, so no CPU figures, but the ledger is still checked.
	xcfg, err := parseFlags([]string{"-targets", "sim,tollgate", "-concurrency", "2", "-chunks", "5",
		"-requests", "20", "-rounds", "1", "-warmup", "0", "-sim-url", st.simURL, "-gateway-url", st.gatewayURL,
		"-key", st.key, "-admin-url", st.adminURL, "-admin-token", st.adminToken, "-customer-id", st.customerID}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	xst, err := startStack(ctx, xcfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	if xst.sim != nil || xst.proxy != nil || xst.gateway != nil || xst.dbName != "" {
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
	r.expected = xr.expected

	// Idle mode, briefly.
	icfg := *cfg
	icfg.targets = []string{"proxy", "tollgate"}
	icfg.streams, icfg.openParallel, icfg.openTimeout, icfg.idleSettle = 30, 10, 30*time.Second, 200*time.Millisecond
	rs, err := runIdle(ctx, &icfg, st, &log, r.expected)
	if err != nil {
		t.Fatal(err)
	}
	for _, ir := range rs {
		if ir.open != 30 || ir.failed != 0 || ir.rss <= 0 || ir.fds < 60 || !ir.rt.ok || ir.rt.goroutines < 30 {
			t.Errorf("idle %s: %d open, %d failed %v, RSS %d, fds %d, runtime %+v", ir.target, ir.open, ir.failed, ir.errs, ir.rss, ir.fds, ir.rt)
		}
	}
	if tg := rs[1]; !tg.verified {
		t.Errorf("idle tollgate: ledger %d of %d (%v)", tg.ledgerN, tg.expect, tg.ledger)
	}
	out.Reset()
	printIdle(&out, rs)
	t.Logf("idle:\n%s", out.String())
}
