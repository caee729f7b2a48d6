package meter

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// trim removes from the usage stream, every TrimEvery until ctx ends, the
// events at or below the durable consumer's ack floor: the stream sequence
// below which every event has been acknowledged, that is written to the
// ledger or set aside in the dead-letter stream (JetStream's
// ConsumerInfo.AckFloor.Stream). An event not yet acknowledged, or
// delivered to no worker yet, is above the floor and stays. The floor is
// the consumer's, not this worker's: every worker sharing the consumer
// trims to the same floor, and a purge below the stream's first sequence
// removes nothing. A failed trim is logged and tried again at the next
// tick; the events stay in the stream meanwhile, which costs only disk.
func (w *Worker) trim(ctx context.Context) {
	t := time.NewTicker(w.cfg.TrimEvery)
	defer t.Stop()
	var trimmed uint64 // the floor of the last trim
	var failing bool   // the last attempt failed and was logged
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		floor, err := w.trimTo(ctx, trimmed)
		switch {
		case err == nil:
			trimmed, failing = floor, false
		case ctx.Err() != nil:
			return
		case !failing:
			failing = true
			w.cfg.Logger.Warn("meter: trimming the usage stream below the ack floor", "err", err)
		}
	}
}

// trimTo purges the stream below the consumer's ack floor when the floor
// has passed trimmed, and returns the floor.
func (w *Worker) trimTo(ctx context.Context, trimmed uint64) (uint64, error) {
	info, err := w.cons.Info(ctx)
	if err != nil {
		return trimmed, err
	}
	floor := info.AckFloor.Stream
	if floor <= trimmed {
		return trimmed, nil
	}
	// WithPurgeSequence(n) removes the messages before n, n kept.
	if err := w.stream.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return trimmed, err
	}
	return floor, nil
}
