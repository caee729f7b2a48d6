package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter"
)

// The waits between the attempts to make the dead-letter stream for the
// admin API after the start could not: the first, doubled after each
// failure up to the longest. Most causes pass by themselves (NATS starting
// after Tollgate, a cluster electing its leader), so the first waits are
// short; what waits for an operator (another stream holding the subject)
// is picked up within the longest wait of the fix. An attempt is one
// stream look-up and update, cheap for NATS.
const (
	dlqFirstWait   = time.Second
	dlqLongestWait = 30 * time.Second
)

// dlqRepeatLog is how long the same failure of the dead-letter stream's
// attempts goes unlogged (at DEBUG) after it was logged at WARN: a NATS
// away for an hour says so a few times, not 120.
const dlqRepeatLog = 10 * time.Minute

// retryDeadLetters is the admin role's way to a dead-letter stream the
// start could not make (err, logged by start): until it is made, adm's
// dead-letter routes, and so the console's page and `tollgate dlq`, answer
// 503 with err (api.Admin.SetDeadLettersPending), and /readyz says so in
// dead_letters (not unready: the rest of the admin API serves). It logs
// that at WARN; in the background it tries again, after waits from
// retry[0] doubling up to retry[1] (zero: dlqFirstWait and
// dlqLongestWait), logging a new cause at WARN and the same one again
// only every dlqRepeatLog (at DEBUG between); once the stream is made it
// enables the routes and logs at INFO. Its stop, registered here, ends
// the wait or the attempt at once.
func (a *app) retryDeadLetters(js jetstream.JetStream, cfg meter.StreamConfig, adm *api.Admin, err error, retry [2]time.Duration) {
	a.setDeadLettersPending(adm, err)
	a.log.Warn("the admin API's dead-letter endpoints (list, replay; the console's page, tollgate dlq) answer 503 until the dead-letter stream is made: "+
		"trying again in the background", "err", err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.untilDeadLetters(ctx, js, cfg, adm, err, retry)
	}()
	a.started("dead-letter stream", 5*time.Second, func(sctx context.Context) error {
		cancel()
		select {
		case <-done:
			return nil
		case <-sctx.Done():
			return sctx.Err()
		}
	})
}

// untilDeadLetters tries to make the dead-letter stream until it is made,
// then hands it to adm, or until ctx ends (see retryDeadLetters).
func (a *app) untilDeadLetters(ctx context.Context, js jetstream.JetStream, cfg meter.StreamConfig, adm *api.Admin, err error, retry [2]time.Duration) {
	wait, longest := retry[0], retry[1]
	if wait <= 0 || longest <= 0 {
		wait, longest = dlqFirstWait, dlqLongestWait
	}
	logged := &repeats{every: dlqRepeatLog}
	logged.first(err.Error(), time.Now()) // start logged it
	t := time.NewTimer(wait)
	defer t.Stop()
	for attempt := 2; ; attempt++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := meter.EnsureDLQ(actx, js, cfg)
		acancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			d.SetLog(a.log) // Remove's record of what it dropped from billing
			adm.SetDeadLetters(d)
			a.dlqState.Store(nil)
			a.log.Info("dead-letter stream made: the admin API's dead-letter endpoints are available", "attempt", attempt)
			return
		}
		a.setDeadLettersPending(adm, err)
		wait = min(wait*2, longest)
		level := slog.LevelDebug
		if logged.first(err.Error(), time.Now()) {
			level = slog.LevelWarn
		}
		a.log.Log(ctx, level, "dead-letter stream still not made: the admin API's dead-letter endpoints answer 503 until it is (the same cause is logged again at WARN every 10 minutes)",
			"attempt", attempt, "next_in", wait.String(), "err", err)
		t.Reset(wait)
	}
}

// setDeadLettersPending makes adm's dead-letter routes and /readyz say
// that the stream is not made yet, and why.
func (a *app) setDeadLettersPending(adm *api.Admin, err error) {
	adm.SetDeadLettersPending(err)
	state := "not reachable yet: " + err.Error() + "; retrying (the admin API's dead-letter endpoints answer 503 meanwhile)"
	a.dlqState.Store(&state)
}
