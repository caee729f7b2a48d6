package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// runPhase runs one phase and measures it against upstream-sim.
func (s *stack) runPhase(ctx context.Context, ph phase, quota, conc int) (rw row) {
	rw.name, rw.kill = ph.name, ph.kill
	start := time.Now()
	defer func() { rw.took = time.Since(start) }()
	st0, err := s.simQuiet(ctx, 30*time.Second)
	if err != nil {
		rw.err = err
		return rw
	}
	redeliveries := s.countRedeliveries(ctx)
	dups0, _ := s.duplicatesRefused(ctx)
	gwLog, logFrom := s.gw.log, logSize(s.gw.log)
	if ph.before != nil {
		if err := ph.before(ctx, s); err != nil {
			rw.err = err
			return rw
		}
	}
	from := time.Now()
	if ph.conc > 0 {
		conc = ph.conc
	}
	r := s.loader.start(quota, float64(quota)/ph.secs, conc, ph.m)
	defer context.AfterFunc(ctx, r.stop)() // interrupted: stop sending at once
	at := ph.at
	if ph.fault == nil {
		at = 0.5 // the in-flight column then shows mid-phase
	}
	for r.sent.Load() < int64(at*float64(quota)) && !isDone(r.done) {
		time.Sleep(5 * time.Millisecond)
	}
	rw.inflight = s.loader.inflight.Load()
	if ph.fault != nil {
		logf("  fault: %s (%d requests in flight)", ph.name, rw.inflight)
		rw.err = ph.fault(ctx, s, r, &rw)
	}
	<-r.done
	rw.sent, rw.failed = r.sent.Load(), r.failed.Load()
	if ctx.Err() != nil {
		redeliveries()
		rw.err = ctx.Err()
		return rw
	}
	st1, err := s.simQuiet(ctx, 60*time.Second)
	if rw.err == nil && err != nil {
		rw.err = err
	}
	to := time.Now()
	sim := simTally(st1).sub(simTally(st0))
	if err := s.settle(ctx, from, to, sim.requests, 120*time.Second); err != nil && rw.err == nil {
		rw.err = fmt.Errorf("settle: %w", err)
	}
	if err := s.measure(ctx, &rw, r, sim, from, to); err != nil && rw.err == nil {
		rw.err = err
	}
	if ph.verify != nil {
		if err := ph.verify(ctx, s, &rw, st0, st1, from, to); err != nil && rw.err == nil {
			rw.err = err
		}
	}
	dups1, _ := s.duplicatesRefused(ctx)
	rw.redelivered, rw.dups = redeliveries(), dups1-dups0
	rw.spooled, _ = spoolLog(gwLog, logFrom, -1)
	if rw.kill {
		rw.addNote("the restarted gateways recorded %d requests from their crash journals "+
			"(a request whose event was durable but not yet marked ended is recorded again under its id, and dropped as a duplicate)",
			journalLog(gwLog, logFrom))
	}
	logf("  %s: %d sent (%s), %s; ledger %s", ph.name, rw.sent, r.statusSummary(), rw.sim, rw.ledger)
	return rw
}

// measure compares the phase's ledger events with what upstream-sim
// billed in it (sim), leaving the poison requests out of both sides, and
// looks up the X-Request-Id of every request that completed.
//
// In a kill phase the requests in flight at the kills are recorded as
// crashed, with estimated usage, so only the request count can match
// exactly: its discrepancy counts requests alone (requestGap: an
// unanswered crashed event may stand for a request upstream-sim never
// received). Every other event of
// the load carries the provider's own figures, so what upstream-sim billed
// for the requests in flight is its phase total minus the ledger's
// non-crashed events (truth); the crashed events should hold about that
// much, and the unbilled share, max(truth - crashed, 0) / truth, is checked
// instead of token equality.
func (s *stack) measure(ctx context.Context, rw *row, r *run, sim tally, from, to time.Time) error {
	rw.sim = sim.sub(rw.simPoison)
	p, err := s.ledgerSplit(ctx, from, to, rw.exclude)
	if err != nil {
		return err
	}
	rw.ledger, rw.recovered, rw.unanswered = p.all, p.crashed, p.unanswered
	if rw.kill {
		rw.truth = rw.sim.tokens() - p.all.sub(p.crashed).tokens()
		rw.disc = requestGap(rw.sim.requests, p)
		if rw.diag, err = s.crashBreakdown(ctx, rw, r, from, to); err != nil {
			return err
		}
	} else {
		rw.disc = p.all.discrepancy(rw.sim)
	}
	r.mu.Lock()
	ids := append(append([]string(nil), r.completed...), rw.probes...)
	r.mu.Unlock()
	rw.completed = int64(len(ids))
	// The events of completed requests were durable before their clients
	// finished; settle waited for the consumer, so they are in by now. A
	// few seconds more only keep a slow republish from reading as a loss.
	_ = waitFor(ctx, 5*time.Second, func() error {
		if rw.missing, err = s.missing(ctx, ids); err == nil && len(rw.missing) > 0 {
			return fmt.Errorf("%d completed requests not in the ledger", len(rw.missing))
		}
		return err
	})
	return err
}

// unbilled is the share of truth the crashed events do not hold, and the
// tokens they hold beyond it (over-billing); ok is false when there was
// nothing in flight.
func (rw *row) unbilled() (share float64, over int64, ok bool) {
	if !rw.kill || rw.truth <= 0 {
		return 0, 0, false
	}
	held := rw.recovered.tokens()
	return float64(max(rw.truth-held, 0)) / float64(rw.truth), max(held-rw.truth, 0), true
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// spoolDepth counts the events in a spool directory not yet published:
// the intact records after the cursor (see meter.Spool's format). It only
// reads.
func spoolDepth(dir string) int64 {
	var cur struct {
		Segment uint64 `json:"segment"`
		Offset  int64  `json:"offset"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cursor")); err == nil {
		_ = json.Unmarshal(b, &cur)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	sort.Strings(names)
	var n int64
	for _, name := range names {
		var seg uint64
		if _, err := fmt.Sscanf(strings.TrimSuffix(filepath.Base(name), ".seg"), "%d", &seg); err != nil || seg < cur.Segment {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		st, _ := f.Stat()
		off := int64(0)
		if seg == cur.Segment {
			off = cur.Offset
		}
		var hdr [8]byte
		for {
			if _, err := f.ReadAt(hdr[:], off); err != nil {
				break
			}
			if off += 8 + int64(binary.BigEndian.Uint32(hdr[:])); off > st.Size() {
				break // a torn record: its append never returned
			}
			n++
		}
		f.Close()
	}
	return n
}

// countRedeliveries samples the meter consumer's redeliveries (delivery
// sequence minus stream sequence) every 100ms, skipping samples while NATS
// is down, until the returned function is called; that returns the sum of
// the increases. A NATS kill -9 can set the consumer's sequences back (its
// state is flushed lazily): a decrease starts a new baseline.
func (s *stack) countRedeliveries(ctx context.Context) func() int64 {
	var total atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		prev, ok := int64(0), false
		for {
			if ci, err := s.consumerInfo(ctx); err == nil {
				if ok && ci.redelivered > prev {
					total.Add(ci.redelivered - prev)
				}
				prev, ok = ci.redelivered, true
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return total.Load()
	}
}
