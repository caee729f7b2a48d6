package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/dirlock"
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
// the directory went. While it waits, the store stays as it is. An attempt
// that fails leaves the store as it is too, and is tried again in the
// process, after a wait of 5 s doubling up to a minute (see handOver);
// stopped before it is done, it leaves the store for the next start. Either
// sends again what an earlier attempt sent: dropped by JetStream's
// duplicate window, then by the ledger's unique event id. A process
// without the gateway role (which holds the data directory's lock) takes
// the lock while an attempt moves the store (not while it waits to try
// again), and leaves the store alone when another process holds it: a
// `tollgate serve` whose embedded server runs on it, or a gateway that
// hands it over itself.
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
		lockAs := "" // a gateway holds its data directory already
		if !r.gateway {
			lockAs = handOverPurpose(strings.TrimPrefix(r.String(), "tollgate "))
		}
		a.handOver(ctx, dir, e.DataDir, lockAs, e.handOverRetry)
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

// The waits between the attempts of a failed hand-over: the first, doubled
// after each failure up to the longest. What fails an attempt is mostly
// brief (NATS lost between the streams' check and the attempt, or for
// longer than meter.HandOver resends without progress), and what is not
// (another stream taking a subject, a message NATS refuses for good: larger
// than its max_payload, past a stream's limits; a directory that cannot be
// renamed) waits for an operator, whose fix the next attempt picks up. An attempt reopens the
// whole store and sends it all again, so it is not repeated more than once
// a minute; and the resends of a failure that lasts a few minutes stay
// within the duplicate window (meter.duplicate_window, 10 minutes by
// default) of the first send, which drops them (past it, the ledger's
// unique event id drops a usage event; a dead letter is stored again).
const (
	handOverFirstWait   = 5 * time.Second
	handOverLongestWait = time.Minute
)

// handOver waits for NATS and its streams, then hands the store in dir
// over, taking dataDir's lock for each attempt, as lockAs says (see
// handOverPurpose), when it is set; a failed attempt is tried again,
// after waits from retry[0] doubling up to retry[1] (zero:
// handOverFirstWait and handOverLongestWait), until one
// succeeds or ctx ends. It logs the outcome: the first failure at ERROR,
// the later ones at WARN, each with its attempt number and the wait.
func (a *app) handOver(ctx context.Context, dir, dataDir, lockAs string, retry [2]time.Duration) {
	wait, longest := retry[0], retry[1]
	if wait <= 0 || longest <= 0 {
		wait, longest = handOverFirstWait, handOverLongestWait
	}
	stopped := func() {
		a.log.Warn("embedded store hand-over: stopped before it was done; the store stays, and the next start hands it over", "dir", dir)
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		a.log.Error("embedded store hand-over: not handed over", "dir", dir, "err", err)
		return
	}
	waited := false
	for attempt := 1; ; attempt++ {
		for {
			err := streamsReady(ctx, js)
			if err == nil {
				break
			}
			if !waited {
				waited = true
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
		done, rep, err := a.handOverOnce(ctx, dir, dataDir, lockAs)
		switch {
		case done:
			return
		case ctx.Err() != nil:
			stopped()
			return
		}
		next := time.Now().Add(wait).UTC()
		a.setHandOver(fmt.Sprintf("failed (attempt %d): %v; the store stays in %s; trying again at %s",
			attempt, err, dir, next.Format(time.RFC3339)))
		args := []any{"dir", dir, "err", err, "attempt", attempt, "retry_in", wait.String(),
			"usage_events_sent", rep.Events, "dead_letters_sent", rep.DeadLetters}
		if attempt == 1 {
			a.log.Error("embedded store hand-over: not handed over; the store stays as it is, and this process tries again (later failures are logged at WARN)", args...)
		} else {
			a.log.Warn("embedded store hand-over: not handed over again; the store stays as it is, and this process tries again", args...)
		}
		select {
		case <-ctx.Done():
			stopped()
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, longest)
	}
}

// handOverOnce is one attempt of handOver, once NATS holds both streams:
// done when the store was handed over, or is left to the process holding
// dataDir's lock (taken for the attempt, and released after it, when lockAs
// is set); else the error (a lock that cannot be taken for another reason
// than another process holding it, too), and what was sent before it.
func (a *app) handOverOnce(ctx context.Context, dir, dataDir, lockAs string) (done bool, rep meter.HandOverReport, err error) {
	if lockAs != "" {
		release, err := lockDataDir(dataDir, lockAs)
		var busy *dirlock.BusyError
		switch {
		case errors.As(err, &busy):
			a.log.Warn("embedded store hand-over: not by this process, which leaves the store to the one using the data directory", "dir", dir, "err", err)
			a.setHandOver("")
			return true, rep, nil
		case err != nil:
			// Not held, and not lockable (LOCK unreadable, say): no other
			// process hands the store over, so the attempt fails and is
			// tried again, /readyz saying why.
			return false, rep, err
		}
		defer release()
	}
	a.setHandOver("moving the usage events and dead letters of " + dir + " to TOLLGATE_NATS_URL")
	if rep, err = meter.HandOver(ctx, dir, a.nc, time.Now(), a.log); err != nil {
		return false, rep, err
	}
	a.setHandOver("")
	a.log.Warn("NATS: the embedded JetStream store was handed over to TOLLGATE_NATS_URL",
		"usage_events", rep.Events, "usage_events_there_already", rep.EventsKnown, "usage_events_metered_before", rep.EventsDone,
		"dead_letters", rep.DeadLetters, "dead_letters_there_already", rep.DeadLettersKnown,
		"moved_to", rep.Dir, "streams_left_there", rep.Left)
	return true, rep, nil
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
