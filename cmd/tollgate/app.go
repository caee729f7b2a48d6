package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/keys"
)

// roles selects what a process runs.
type roles struct{ gateway, meter, admin bool }

func (r roles) all() bool { return r.gateway && r.meter && r.admin }

// String is the command that runs r ("tollgate serve", "tollgate
// gateway", "tollgate meter", "tollgate admin").
func (r roles) String() string {
	switch {
	case r.all():
		return "tollgate serve"
	case r.gatewayOnly():
		return "tollgate gateway"
	case r.meter && !r.gateway && !r.admin:
		return "tollgate meter"
	case r.admin && !r.gateway && !r.meter:
		return "tollgate admin"
	}
	return fmt.Sprintf("tollgate (gateway %t, meter %t, admin %t)", r.gateway, r.meter, r.admin)
}

// applicationName is the application_name of r's Postgres sessions: its
// command, hyphenated ("tollgate-meter"); "tollgate" for a set of roles
// no command runs.
func (r roles) applicationName() string {
	name, _, _ := strings.Cut(r.String(), " (")
	return strings.ReplaceAll(name, " ", "-")
}

// gatewayOnly is the gateway role alone (tollgate gateway).
func (r roles) gatewayOnly() bool { return r.gateway && !r.meter && !r.admin }

// app is a running set of roles: its components, each started by start
// and stopped by close in the reverse order. Tests build one with start
// and stop it with close.
type app struct {
	log         *slog.Logger
	grace       time.Duration
	store       *ledger.Store
	db          *dbCheck        // the database's check for /readyz and tollgate_database_up
	ns          *meter.Embedded // embedded JetStream, when no NATS URL is set
	nc          *nats.Conn
	dlq         *meter.DLQ
	worker      *meter.Service
	keys        *keys.Cache  // the gateway's view of the keys
	keySync     *keys.Syncer // publishes the ledger's key changes (meter and admin roles)
	share       *keys.Share  // the gateways' shared limit counts
	spool       *meter.Spool
	dead        *meter.Spool // events that cannot be published, for the dead-letter stream
	republisher *meter.Republisher
	journal     *journal.Journal
	sink        *meter.DurablePublisher
	gw          *gateway.Server
	admin       *api.Listener
	stops       []stopper
	// handOverState is what the hand-over of an embedded JetStream store left
	// in the data directory is doing (startHandOver), for /readyz: nil or
	// "" when there is none, or it is done.
	handOverState atomic.Pointer[string]
	// dlqState is why the admin API's dead-letter routes are not available
	// yet (retryDeadLetters), for /readyz: nil once they are, or when this
	// process has no admin role or no NATS.
	dlqState atomic.Pointer[string]
	// Addr and AdminAddr are the bound listen addresses.
	Addr, AdminAddr string
}

// stopper stops one started component within timeout (0: the shutdown
// grace period).
type stopper struct {
	name    string
	timeout time.Duration
	stop    func(context.Context) error
	early   bool // its stop begins as close begins (startedEarly)
}

// started records a component to stop at close, after those started later.
func (a *app) started(name string, timeout time.Duration, stop func(context.Context) error) {
	a.stops = append(a.stops, stopper{name: name, timeout: timeout, stop: stop})
}

// startedEarly is started for a component whose stop begins as close
// begins, beside the stops of those started later, and is waited for in
// its turn: the gateway stops taking requests at once, not after the
// admin listener's wait for its exports (up to 10 s of new requests).
func (a *app) startedEarly(name string, timeout time.Duration, stop func(context.Context) error) {
	a.stops = append(a.stops, stopper{name: name, timeout: timeout, stop: stop, early: true})
}

// close stops every started component in the reverse order of their
// start, the gateway's stop begun first (startedEarly): the admin
// listener (an export still running after 10 s is cut off); the gateway
// (in-flight requests finish within the grace period or are cut off, and
// every usage event is durable when it returns); the crash journal; the republisher (its last drain, while
// NATS is there) and the spools; the key cache and the key sync; the meter worker (it
// writes or hands back all it was sent); NATS; the database. It is safe on
// a partly started app, and idempotent.
func (a *app) close() error {
	run := func(s stopper) error {
		timeout := s.timeout
		if timeout == 0 {
			timeout = a.grace
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := s.stop(ctx); err != nil {
			return fmt.Errorf("stop %s: %w", s.name, err)
		}
		return nil
	}
	early := map[int]chan error{}
	for i, s := range a.stops {
		if s.early {
			done := make(chan error, 1)
			early[i] = done
			go func() { done <- run(s) }()
		}
	}
	var errs []error
	for i := len(a.stops) - 1; i >= 0; i-- {
		var err error
		if done, ok := early[i]; ok {
			err = <-done
		} else {
			err = run(a.stops[i])
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	a.stops = nil
	return errors.Join(errs...)
}

// stopGateway is the gateway's stop: a grace period that runs out is no
// error of the shutdown (the streams were cut off and recorded).
func (a *app) stopGateway(ctx context.Context) error {
	if err := a.gw.Stop(ctx); err != nil {
		a.log.Warn("shutdown: grace period over, requests were cut off", "grace", a.grace.String())
	}
	return nil
}

// closeSpool closes a spool, saying what stays in it for the next start.
func (a *app) closeSpool(sp *meter.Spool) func(context.Context) error {
	return func(context.Context) error {
		if n, _, _ := sp.Stats(); n > 0 {
			a.log.Warn("spool: records stay spooled for the next start", "records", n)
		}
		return sp.Close()
	}
}
