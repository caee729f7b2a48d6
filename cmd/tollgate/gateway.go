package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/dashboards/metrics"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/web"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// keyLoadWait bounds how long a gateway's start waits for the key buckets
// (env.keyLoadWait, when set, instead).
const keyLoadWait = 10 * time.Second

// openBuckets opens (or creates) the key buckets on js.
func (a *app) openBuckets(js jetstream.JetStream, mc meter.Config) func(context.Context) (keys.Buckets, error) {
	return func(ctx context.Context) (keys.Buckets, error) { return keys.EnsureBuckets(ctx, js, mc.Replicas) }
}

// startGateway wires the gateway role: the key cache and the limit share, the spools and
// their republisher, the durable publisher, the crash journal (recovering
// what a crashed process left in it), and the LLM listener with the
// customer API.
func (a *app) startGateway(ctx context.Context, e env, cfg *fileConfig, mc meter.Config,
	js jetstream.JetStream, reg *prometheus.Registry, mm *metrics.Meter) error {
	log := a.log
	// The limit share first: the other gateways' counts are heard while
	// the keys load (Share.Joined, below).
	var err error
	if a.share, err = keys.NewShare(a.nc, log); err != nil {
		return err
	}
	a.started("limit share", 5*time.Second, func(context.Context) error { return a.share.Close() })
	a.keys = keys.NewCache(a.openBuckets(js, mc), a.store, log)
	wait := keyLoadWait
	if e.keyLoadWait > 0 {
		wait = e.keyLoadWait
	}
	if err := a.waitForKeys(ctx, wait); err != nil {
		log.Warn("key cache: not loaded yet (NATS unreachable?); the gateway is not ready until it is, and checks keys in the ledger meanwhile", "err", err)
	}
	a.started("key cache", 5*time.Second, a.keys.Stop)
	if a.spool, err = meter.OpenSpool(filepath.Join(e.DataDir, "spool"), mc.SpoolMaxBytes); err != nil {
		return err
	}
	a.started("spool", 5*time.Second, a.closeSpool(a.spool))
	if n, _, _ := a.spool.Stats(); n > 0 {
		log.Warn("spool: usage events left by an earlier run will be republished", "events", n)
	}
	if a.dead, err = meter.OpenSpool(filepath.Join(e.DataDir, "spool-dead"), 0); err != nil {
		return err
	}
	a.started("dead-letter spool", 5*time.Second, a.closeSpool(a.dead))
	pub := meter.NewPublisher(js, mc.Stream(), mc.PublishTimeout)
	a.republisher = meter.NewRepublisher(a.spool, a.dead, pub, js, mc.Stream(), a.nc.IsConnected, time.Second, log)
	a.republisher.Start()
	a.started("spool republisher", 10*time.Second, a.republisher.Stop) // its last drain, NATS still there
	mm.CollectSpool(a.spool)
	mm.CollectDeadSpool(a.dead)
	a.sink = meter.NewDurablePublisher(pub, a.spool, a.dead, a.nc.IsConnected, mc.SpoolMaxAge, log, mm)
	var crashed []journal.Request
	if a.journal, crashed, err = journal.Open(filepath.Join(e.DataDir, "journal")); err != nil {
		return err
	}
	a.started("crash journal", 5*time.Second, func(context.Context) error { return a.journal.Close() })
	mm.CollectJournal(a.journal)
	if a.gw, err = gateway.New(cfg.Config, gateway.Deps{Providers: providers(), Keys: a.keys, Limits: a.share, Rates: a.keys, Sink: a.sink,
		Journal: a.journal, HiddenReasoning: a.journal.RecoveredHiddenReasoning(), SpendCharges: a.journal.RecoveredSpendCharges(),
		Log: log, Metrics: reg}); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := a.recover(ctx, crashed); err != nil {
		return err
	}
	llm := chi.NewRouter()
	self, customerAPI := api.NewSelf(a.store, a.keys, log), chi.NewRouter()
	self.Routes(llm)
	self.Routes(customerAPI)
	web.NewPortal(customerAPI, log).Routes(llm) // the customer portal, over the customer API
	gw := a.gw.Handler()
	llm.Mount("/", gw)
	// A method chi does not know is answered by this router before any
	// route: the gateway answers it (405, its JSON error), not chi (a bare
	// 405 with no body).
	llm.MethodNotAllowed(gw.ServeHTTP)
	if a.ns == nil {
		// On a NATS other gateways may share: serve once their counts of
		// the keys' minutes and open requests are heard, not from none.
		a.share.Joined(ctx)
	}
	if err := a.gw.Start(e.Listen, llm); err != nil {
		return fmt.Errorf("TOLLGATE_LISTEN: %w", err)
	}
	a.Addr = a.gw.Addr()
	a.startedEarly("gateway", 0, a.stopGateway)
	return nil
}

// waitForKeys starts the key cache and waits for its first load of the
// buckets for at most wait, and only while NATS is connected: with NATS
// unreachable the wait could not end early, and would only keep the
// listener closed, though the gateway serves without NATS (keys are
// checked in the ledger, events spooled). The cache goes on loading in the
// background either way (Cache.Start). It returns the cache's error, or
// one saying NATS is not connected.
func (a *app) waitForKeys(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("key buckets not loaded within %s", wait))
	defer cancel()
	down := errors.New("NATS is not connected")
	ctx, drop := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() { // ends with the wait
		defer close(watched)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for a.nc.IsConnected() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		drop(down)
	}()
	err := a.keys.Start(ctx)
	drop(nil)
	<-watched
	if err != nil {
		return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	return nil
}

// recover records, as crashed, the requests an earlier process left in
// flight in the crash journal, then lets the journal forget them. Events it
// can neither publish nor spool (the spool's disk full) do not stop the
// start: a review saw a gateway whose spool had filled its disk during a
// NATS outage exit at every start, in a loop, its spool never drained.
// The gateway serves, and retryRecovered sends them once it can; the
// journal keeps them until then, and a restart recovers them again.
func (a *app) recover(ctx context.Context, crashed []journal.Request) error {
	if len(crashed) == 0 {
		return a.journal.Release()
	}
	return a.recordRecovered(ctx, a.gw.Recover(crashed))
}

// recordRecovered makes the recovered requests' events durable and
// releases the journal, or, when it cannot, leaves them to retryRecovered
// (see recover).
func (a *app) recordRecovered(ctx context.Context, events []usage.Event) error {
	rest, err := a.publishRecovered(ctx, events)
	if err == nil {
		a.log.Warn("crash journal: requests in flight when the last process died are recorded", "requests", len(events))
		return a.journal.Release()
	}
	a.log.Error("crash journal: requests in flight when the last process died could not be recorded yet; "+
		"retried every 10 s (the journal keeps them meanwhile)", "requests", len(events), "not_recorded", len(rest), "err", err)
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go a.retryRecovered(rctx, rest, done)
	a.started("recovered requests' retry", 5*time.Second, func(context.Context) error {
		stop() // an attempt in hand ends too
		<-done
		return nil
	})
	return nil
}

// publishRecovered publishes events in order, behind the spool: a
// request's real event, spooled just before the crash, goes first, and the
// ledger keeps it rather than this estimate. It returns the events from
// the first it could not make durable on, with that error.
func (a *app) publishRecovered(ctx context.Context, events []usage.Event) ([]usage.Event, error) {
	for i := range events {
		if err := a.sink.PublishBehindSpool(ctx, &events[i]); err != nil {
			return events[i:], fmt.Errorf("recover the requests in flight at the last crash: %w", err)
		}
	}
	return nil, nil
}

// retryRecovered tries the recovered events publishRecovered could not
// make durable every recoveryRetry until it can, then releases the
// journal; it returns when ctx ends (an attempt in hand with it), closing
// done.
func (a *app) retryRecovered(ctx context.Context, rest []usage.Event, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(recoveryRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		left, err := a.publishRecovered(actx, rest)
		cancel()
		if err != nil {
			rest = left
			a.log.Warn("crash journal: recovered requests still not recorded", "not_recorded", len(rest), "err", err)
			continue
		}
		if err := a.journal.Release(); err != nil {
			a.log.Error("crash journal: the recovered requests are recorded, but the journal could not forget them "+
				"(the next start records them again; the ledger drops the repeats)", "err", err)
		} else {
			a.log.Warn("crash journal: the recovered requests in flight when the last process died are recorded")
		}
		return
	}
}

// recoveryRetry is how often retryRecovered tries again.
var recoveryRetry = 10 * time.Second
