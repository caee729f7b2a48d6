package main

import (
	"context"

	"fmt"
	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"path/filepath"
	"syscall"
	"time"
)

// phase is one fault under load. Its share of -requests is paced over
// secs, at most conc at once (0: -concurrency); fault runs once at of that
// share are sent.
type phase struct {
	name  string
	share float64
	secs  float64
	conc  int
	m     mix
	at    float64
	fault func(ctx context.Context, s *stack, r *run, rw *row) error
	// kill: the gateway is kill -9'd with requests in flight, whose usage
	// is then recorded from its crash journal, estimated. Only the request
	// count can be exact; the tokens are bounded by the unbilled share.
	kill bool
	// before, when set, runs before the phase's load starts; verify, when
	// set, checks the phase further, given upstream-sim's stats at its
	// start and end, adding to the row's checks.
	before func(ctx context.Context, s *stack) error
	verify func(ctx context.Context, s *stack, rw *row, st0, st1 sim.Stats, from, to time.Time) error
}

// row is one line of the report.
type row struct {
	name              string
	sent, failed      int64
	inflight          int64 // client requests in flight when the fault hit (kill phases: streams upstream, summed over the kills)
	spooled           int64 // events the gateway republished from its spool
	redelivered, dups int64 // JetStream redeliveries; deliveries the ledger refused as duplicates
	sim, ledger       tally // the phase, poison left out of both sides
	disc              int64
	took              time.Duration
	note              string
	err               error

	kill       bool
	exclude    []string // poison events of the load customer, left out of the ledger side
	simPoison  tally    // what upstream-sim billed for the poison requests, left out of its side
	completed  int64    // requests whose client got a complete answer
	missing    []string // of those, the X-Request-Ids the ledger does not hold
	probes     []string // kill phases: the X-Request-Ids of the streams read to [DONE] just before the kills
	recovered  tally    // events with status crashed
	unanswered int64    // of those, the ones with nothing billed (see ledgerParts)
	truth      int64    // kill phases: tokens upstream-sim billed for the requests in flight at the kills
	diag       string   // kill phases: where the crashed events' figures come from (crashBreakdown)
	checks     []check  // pass/fail lines of the phase, printed with the final checks
}

// addNote appends a sentence to the row's note.
func (rw *row) addNote(format string, args ...any) {
	if rw.note != "" {
		rw.note += "; "
	}
	rw.note += fmt.Sprintf(format, args...)
}

// check is one ok/FAIL line of the report.
type check struct {
	name, detail string
	pass         bool
}

var phases = []phase{
	{name: "upstream errors + stalls", share: 1, secs: 6, m: errorMix},
	{name: "client disconnects", share: 1, secs: 6, m: cancelMix},
	{name: "poison events", share: 1, secs: 7, m: fullMix, at: 0.1, fault: injectPoison},
	{name: "restart NATS (kill -9, 3s)", share: 1.2, secs: 9, m: fullMix, at: 0.3, fault: restartNATS},
	{name: "stop Postgres 10s", share: 1.5, secs: 14, m: fullMix, at: 0.2, fault: stopPostgres},
	{name: "kill -9 meter worker", share: 1, secs: 7, m: fullMix, at: 0.4, fault: killMeter},
	{name: "kill -9 gateway (spool)", share: 1, secs: 7, m: fullMix, at: 0.3, fault: killGateway},
	// Twice: three kills each, with 50 streams and more in flight, each the
	// moment a client has read a stream to its [DONE].
	{name: "kill -9 gateway x3 (1)", share: 2, secs: 12, conc: 100, m: crashMix, at: 0.25, fault: killMidStream, kill: true},
	{name: "kill -9 gateway x3 (2)", share: 2, secs: 12, conc: 100, m: crashMix, at: 0.25, fault: killMidStream, kill: true},
	// A model of two deployments, one of which fails every request it
	// gets (503): its attempts are retried on the other, recorded not
	// charged; the ledger per deployment equals what each one served.
	{name: "deployment east fails throughout", share: 1, secs: 6, m: deployMix, before: failEast, verify: checkDeployments},
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
// it and waits until no request is in flight (the kill phases below kill
// with requests in flight: the point here is the spool), kill -9s the
// gateway, appends poison to its spool (spoolPoison), starts NATS and the
// gateway again on the same data directory, and waits until it has
// republished its spool (so that the row counts it).
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
	if err := s.spoolPoison(rw); err != nil {
		return fmt.Errorf("append poison to the dead gateway's spool: %w", err)
	}
	if err := s.startNATS(ctx); err != nil {
		return err
	}
	if err := s.startGateway(ctx); err != nil {
		return err
	}
	return s.gw.waitLog(ctx, `"msg":"spool: republished","what":"usage events"`, 30*time.Second)
}
