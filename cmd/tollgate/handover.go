package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// startHandOver hands the store an embedded JetStream left in the data
// directory (a `tollgate serve` without TOLLGATE_NATS_URL ran on it) over to
// the NATS of TOLLGATE_NATS_URL, which a.nc is connected to: without it,
// the events the ledger did not have yet when the process switched, and
// the dead letters, would stay in $TOLLGATE_DATA_DIR/jetstream, read by no
// one. It runs in the background, so that a NATS not reachable yet does not
// hold the roles back: it waits for NATS and for its usage and dead-letter
// streams (the roles' start, or the meter worker, makes them), then moves
// every message (meter.HandOver) and renames the directory to
// jetstream.handed-over-<UTC time>, logging at WARN what it moved and where
// the directory went. While it waits, the store stays as it is; stopped
// before it is done, or failing, it leaves the store for the next start,
// which hands it over again (a message sent twice is dropped by JetStream's
// duplicate window, then by the ledger's unique event id). A process
// without the gateway role (which holds the data directory's lock) takes
// the lock while it moves the store, and leaves the store alone when
// another process holds it: a `tollgate serve` whose embedded server runs
// on it, or a gateway that hands it over itself.
func (a *app) startHandOver(e env, r roles) {
	dir := filepath.Join(e.DataDir, "jetstream")
	found, err := meter.HasEmbeddedStore(dir)
	if err != nil {
		a.log.Error("embedded store hand-over: cannot tell whether the data directory holds a store; not handed over", "err", err)
		return
	}
	if !found {
		return
	}
	a.log.Warn("NATS: the data directory holds the store of an embedded JetStream (`tollgate serve` without TOLLGATE_NATS_URL ran on it): "+
		"handing its usage events and dead letters over to TOLLGATE_NATS_URL in the background", "dir", dir)
	a.setHandOver("waiting for NATS and its usage and dead-letter streams; the store stays in " + dir + " meanwhile")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.handOver(ctx, dir, e.DataDir, !r.gateway)
	}()
	a.started("embedded store hand-over", 10*time.Second, func(sctx context.Context) error {
		cancel()
		select {
		case <-done:
			return nil
		case <-sctx.Done():
			return sctx.Err()
		}
	})
}

// handOver waits for NATS and its streams, then hands the store in dir
// over, taking dataDir's lock for it when lock is set; it logs the outcome.
func (a *app) handOver(ctx context.Context, dir, dataDir string, lock bool) {
	stopped := func() {
		a.log.Warn("embedded store hand-over: stopped before it was done; the store stays, and the next start hands it over", "dir", dir)
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		a.log.Error("embedded store hand-over: not handed over", "dir", dir, "err", err)
		return
	}
	for waited := false; ; waited = true {
		err := streamsReady(ctx, js)
		if err == nil {
			break
		}
		if !waited {
			a.log.Warn("embedded store hand-over: waiting for NATS and its usage and dead-letter streams; the store stays as it is meanwhile",
				"dir", dir, "err", err)
		}
		a.setHandOver("waiting for NATS and its usage and dead-letter streams (" + err.Error() + "); the store stays in " + dir + " meanwhile")
		select {
		case <-ctx.Done():
			stopped()
			return
		case <-time.After(time.Second):
		}
	}
	if lock {
		release, err := lockDataDir(dataDir)
		if err != nil {
			a.log.Warn("embedded store hand-over: not by this process, which leaves the store to the one using the data directory", "dir", dir, "err", err)
			a.setHandOver("")
			return
		}
		defer release()
	}
	a.setHandOver("moving the usage events and dead letters of " + dir + " to TOLLGATE_NATS_URL")
	rep, err := meter.HandOver(ctx, dir, a.nc, time.Now(), a.log)
	switch {
	case err != nil && ctx.Err() != nil:
		stopped()
	case err != nil:
		a.setHandOver("failed: " + err.Error() + "; the store stays in " + dir + ", and the next start hands it over again")
		a.log.Error("embedded store hand-over: not handed over; the store stays as it is, and the next start tries again", "dir", dir, "err", err,
			"usage_events_sent", rep.Events, "dead_letters_sent", rep.DeadLetters)
	default:
		a.setHandOver("")
		a.log.Warn("NATS: the embedded JetStream store was handed over to TOLLGATE_NATS_URL",
			"usage_events", rep.Events, "usage_events_there_already", rep.EventsKnown, "usage_events_metered_before", rep.EventsDone,
			"dead_letters", rep.DeadLetters, "dead_letters_there_already", rep.DeadLettersKnown,
			"moved_to", rep.Dir, "streams_left_there", rep.Left)
	}
}

// streamsReady returns nil once NATS answers for both the usage and the
// dead-letter stream.
func streamsReady(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var errs []error
	for _, name := range []string{meter.DefaultStreamName, meter.DLQStream} {
		if _, err := js.Stream(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// setHandOver records what the embedded store's hand-over is doing, for
// /readyz ("": nothing, or done).
func (a *app) setHandOver(state string) { a.handOverState.Store(&state) }
