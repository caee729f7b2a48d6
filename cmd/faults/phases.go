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
	"syscall"
	"time"
)

// phase is one fault under load. Its share of -requests is paced over
// secs; fault runs once at of that share are sent.
type phase struct {
	name  string
	share float64
	secs  float64
	m     mix
	at    float64
	fault func(ctx context.Context, s *stack, r *run, rw *row) error
}

// row is one line of the report.
type row struct {
	name              string
	sent, failed      int64
	inflight          int64 // client requests in flight when the fault hit
	spooled           int64 // events the gateway republished from its spool
	redelivered, dups int64 // JetStream redeliveries; deliveries the ledger refused as duplicates
	sim, ledger       tally
	disc              int64
	took              time.Duration
	note              string
	err               error
}

var phases = []phase{
	{name: "upstream errors + stalls", share: 1, secs: 6, m: errorMix},
	{name: "client disconnects", share: 1, secs: 6, m: cancelMix},
	{name: "restart NATS (kill -9, 3s)", share: 1.2, secs: 9, m: fullMix, at: 0.3, fault: restartNATS},
	{name: "stop Postgres 10s", share: 1.5, secs: 14, m: fullMix, at: 0.2, fault: stopPostgres},
	{name: "kill -9 meter worker", share: 1, secs: 7, m: fullMix, at: 0.4, fault: killMeter},
	{name: "kill -9 gateway (spool)", share: 1, secs: 7, m: fullMix, at: 0.3, fault: killGateway},
}

func restartNATS(ctx context.Context, s *stack, _ *run, _ *row) error {
	s.nats.kill9()
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	return s.startNATS(ctx)
}

func stopPostgres(ctx context.Context, s *stack, _ *run, _ *row) error {
	if err := s.pg.stop(ctx); err != nil {
		return err
	}
	if err := sleep(ctx, 10*time.Second); err != nil {
		return err
	}
	return s.pg.start(ctx)
}

// killMeter kill -9s the meter worker while it holds unacknowledged
// events (they are redelivered after ack_wait) and starts two in its
// place, sharing the durable consumer, for the rest of the run. To be sure
// to catch it holding some, it is frozen (SIGSTOP) first: JetStream goes on
// delivering to its outstanding pull until the kill.
func killMeter(ctx context.Context, s *stack, _ *run, rw *row) error {
	victims := s.meters
	s.meters = nil
	for _, v := range victims {
		_ = syscall.Kill(v.pid(), syscall.SIGSTOP)
	}
	var held uint64
	_ = waitFor(ctx, 3*time.Second, func() error {
		ci, err := s.consumerInfo(ctx)
		if held = ci.ackPending; err == nil && held < 20 {
			err = fmt.Errorf("%d events held", held)
		}
		return err
	})
	for _, v := range victims {
		v.kill9()
	}
	rw.note = fmt.Sprintf("killed %s holding %d unacknowledged events; started meter-%d and meter-%d",
		victims[0].name, held, s.started+1, s.started+2)
	if err := s.startMeter(ctx); err != nil {
		return err
	}
	return s.startMeter(ctx)
}

// killGateway stops NATS so that events spool, lets the load run on, stops
// it and waits until no request is in flight (one in flight at a kill -9 is
// lost by definition: the point is the spool), kill -9s the gateway, starts
// NATS and the gateway again on the same data directory: it republishes.
func killGateway(ctx context.Context, s *stack, r *run, rw *row) error {
	s.nats.kill9()
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	r.stop()
	<-r.done
	if _, err := s.simQuiet(ctx, 30*time.Second); err != nil {
		return err
	}
	spool := filepath.Join(s.gwData, "spool")
	last, stable := int64(-1), 0
	err := waitFor(ctx, 10*time.Second, func() error { // events are published (here: spooled) asynchronously
		n := spoolDepth(spool)
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		if stable < 10 {
			return fmt.Errorf("spool still growing: %d events", n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rw.note = fmt.Sprintf("%d requests in flight when NATS stopped, %d at the kill; %d events on disk in the spool at the kill",
		rw.inflight, s.loader.inflight.Load(), last)
	rw.inflight = s.loader.inflight.Load()
	s.gw.kill9()
	if err := s.startNATS(ctx); err != nil {
		return err
	}
	return s.startGateway(ctx)
}

// runPhase runs one phase and measures it against upstream-sim.
func (s *stack) runPhase(ctx context.Context, ph phase, quota, conc int) (rw row) {
	rw.name = ph.name
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
	from := time.Now()
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
	rw.sim = simTally(st1).sub(simTally(st0))
	if err := s.settle(ctx, from, to, rw.sim.requests, 120*time.Second); err != nil && rw.err == nil {
		rw.err = fmt.Errorf("settle: %w", err)
	}
	rw.ledger, err = s.ledgerTally(ctx, from, to)
	if err != nil && rw.err == nil {
		rw.err = err
	}
	rw.disc = rw.ledger.discrepancy(rw.sim)
	dups1, _ := s.duplicatesRefused(ctx)
	rw.redelivered, rw.dups = redeliveries(), dups1-dups0
	rw.spooled, _ = spoolLog(gwLog, logFrom, -1)
	logf("  %s: %d sent (%s), %s; ledger %s", ph.name, rw.sent, r.statusSummary(), rw.sim, rw.ledger)
	return rw
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
