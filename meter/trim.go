package meter

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// trimLogEvery is how often a trim that keeps failing is logged again.
const trimLogEvery = 5 * time.Minute

// trimErrorAfter is how long trims must keep failing to be logged at ERROR:
// a leader change, or a node resuming with a stale view of the stream
// (an ack floor past a last sequence it has not caught up on yet), fails a
// few trims and passes within seconds; permissions or a stream that lost
// its tail do not.
const trimErrorAfter = time.Minute

// trimFailures is how a run of failed trims is logged: at WARN at its
// first failure, at ERROR once it has lasted trimErrorAfter and then every
// trimLogEvery; and its end, once it had been logged.
type trimFailures struct {
	since, logged time.Time
	erred         bool
}

// failed records a failure at now and returns the level to log it at, and
// whether to log it.
func (f *trimFailures) failed(now time.Time) (slog.Level, bool) {
	if f.since.IsZero() {
		f.since = now
	}
	switch {
	case now.Sub(f.since) >= trimErrorAfter:
		if !f.erred || now.Sub(f.logged) >= trimLogEvery {
			f.erred, f.logged = true, now
			return slog.LevelError, true
		}
	case f.logged.IsZero():
		f.logged = now
		return slog.LevelWarn, true
	}
	return 0, false
}

// ok records a trim that worked, and reports whether it ends a run of
// failures that was logged.
func (f *trimFailures) ok() bool {
	logged := !f.logged.IsZero()
	*f = trimFailures{}
	return logged
}

// trim removes from the usage stream, every TrimEvery until ctx ends, the
// events at or below the durable consumer's ack floor: the stream sequence
// below which every event has been acknowledged, that is written to the
// ledger or set aside in the dead-letter stream (JetStream's
// ConsumerInfo.AckFloor.Stream). An event not yet acknowledged, or
// delivered to no worker yet, is above the floor and stays. The floor is
// the consumer's, not this worker's: every worker sharing the consumer
// trims to the same floor, and a purge below the stream's first sequence
// removes nothing. A failed or refused trim is logged (see trimFailures),
// counted (Observer.TrimFailed) and tried again at the next tick; the
// events stay in the stream meanwhile, which costs only disk.
func (w *Worker) trim(ctx context.Context) {
	t := time.NewTicker(w.cfg.TrimEvery)
	defer t.Stop()
	var trimmed uint64 // the floor of the last trim
	var fails trimFailures
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		floor, err := w.trimTo(ctx, trimmed)
		switch {
		case err == nil:
			trimmed = floor
			if fails.ok() {
				w.cfg.Logger.Info("meter: the usage stream is trimmed again")
			}
		case ctx.Err() != nil:
			return
		default:
			w.obs.TrimFailed()
			if level, ok := fails.failed(time.Now()); ok {
				w.cfg.Logger.Log(ctx, level, "meter: the usage stream is not trimmed; it keeps every event until this is fixed",
					"err", err, "failing_for", time.Since(fails.since).Round(time.Second).String())
			}
		}
	}
}

// trimTo purges the stream below the consumer's ack floor when the floor
// has passed trimmed (see trimFloor), and returns the floor trimmed to.
func (w *Worker) trimTo(ctx context.Context, trimmed uint64) (uint64, error) {
	info, err := w.cons.Info(ctx)
	if err != nil || info.AckFloor.Stream <= trimmed {
		return trimmed, err
	}
	si, err := w.stream.Info(ctx)
	if err != nil {
		return trimmed, err
	}
	floor, err := trimFloor(info.AckFloor.Stream, info.Delivered.Stream, si.State.LastSeq)
	if err != nil {
		return trimmed, fmt.Errorf("consumer %s: %w", w.cfg.Durable, err)
	}
	// WithPurgeSequence(n) removes the messages before n, n kept.
	if err := w.stream.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return trimmed, err
	}
	return floor, nil
}

// trimFloor is the stream sequence a trim may remove events up to (all
// of them acknowledged), from the consumer's ack floor, the last stream
// sequence it delivered and the stream's last sequence. It refuses a floor
// past either: neither can hold while the consumer and the stream agree (a
// stream that lost its tail in a power loss under a consumer that did not,
// say), and a purge to such a floor would remove events published since,
// which no worker has.
func trimFloor(ackFloor, delivered, last uint64) (uint64, error) {
	switch {
	case ackFloor > delivered:
		return 0, fmt.Errorf("ack floor %d is past the last event delivered, %d; not trimmed", ackFloor, delivered)
	case ackFloor > last:
		return 0, fmt.Errorf("ack floor %d is past the stream's last sequence %d: the stream lost events the consumer had seen; not trimmed (restore the stream, or recreate the consumer)", ackFloor, last)
	}
	return ackFloor, nil
}

// minTrimServer is the oldest NATS server the workers trim the usage stream
// on. Servers 2.9.12 to 2.9.14 drop a consumer's pending acknowledgments on
// a purge without a subject, after which its ack floor can pass events no
// worker wrote (nats-server pull request 3892, fixed in 2.9.15), so a trim
// there could remove them.
var minTrimServer = [3]int{2, 9, 15}

// trimmable reports whether a server of version v (as a NATS server
// reports it: "2.10.4", "2.11.0-beta.2") can have its usage stream
// trimmed (see minTrimServer).
func trimmable(v string) bool {
	v, _, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		if n != minTrimServer[i] {
			return n > minTrimServer[i]
		}
	}
	return true
}
