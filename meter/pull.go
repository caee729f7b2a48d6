package meter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pull consumes the worker's durable consumer into batches on out until
// ctx ends, then drains: every message the server delivered to the worker
// is put in a batch, and so written or handed back, none left to the ack
// wait. Run reads out to its end. It returns an error only when the
// consumer is gone (deleted) or the usage stream is (errStreamReplaced);
// other failures are retried after a backoff.
//
// It consumes through one subscription for as long as it runs (nats.go's
// Consume), not a Fetch per batch. A Fetch ends on its own timer once no
// message came for its wait plus a second, and the messages that reached
// its channel meanwhile are dropped with it: when the process could not
// run the Fetch's goroutine for over a second (10,000 client hang-ups at
// once on two CPUs, a VM's pause), delivered events waited out the ack
// wait, 30 s, before the ledger had them (BENCHMARKS.md, "Issue 16, stop
// 41").
func (w *Worker) pull(ctx context.Context, out chan<- []jetstream.Msg) error {
	backoff := newBackoff(5 * time.Second)
	for ctx.Err() == nil {
		err := w.consume(ctx, out)
		switch {
		case err == nil:
			return nil // ctx ended
		case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound),
			errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, errStreamReplaced):
			return fmt.Errorf("consume %s: %w", w.cfg.Durable, err) // the service sets them up again
		}
		wait, _ := backoff.Next()
		w.cfg.Logger.Warn("meter: consume", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// consume runs one subscription of the consumer until ctx ends (it drains
// the subscription then, and returns nil) or the subscription ends on its
// own, when it returns why. A batch is the messages that came within
// BatchWait of its first one, at most BatchSize of them.
func (w *Worker) consume(ctx context.Context, out chan<- []jetstream.Msg) error {
	msgs := make(chan jetstream.Msg, w.cfg.BatchSize)
	// quit is closed once consume no longer reads msgs: a message the
	// handler holds then is sent back at once (Nak), not left to the ack
	// wait.
	quit := make(chan struct{})
	var quitOnce sync.Once
	stopReading := func() { quitOnce.Do(func() { close(quit) }) }
	defer stopReading()
	ended := make(chan error, 1)
	// suspect is signalled when heartbeats stop or a pull finds no
	// responder: the consumer may be gone with no word of it (NATS
	// restarted without its store), which only asking for it tells.
	suspect := make(chan struct{}, 1)
	cc, err := w.cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-quit:
			if w.gate.live(ctx) {
				_ = m.Nak()
			}
		}
	},
		// The messages delivered and not yet batched, at most: nats.go asks
		// for more as they fall below half of it.
		jetstream.PullMaxMessages(w.cfg.BatchSize),
		jetstream.PullExpiry(w.cfg.pullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			switch {
			case consumeEnds(err):
				w.gate.suspect() // the consumer gone, perhaps with its stream
				select {
				case ended <- err:
				default:
				}
			case errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, nats.ErrNoResponders):
				select {
				case suspect <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return err
	}
	// The drain begins as ctx ends, not when the loop below next looks:
	// it may be in flush, waiting for the writer (Postgres hanging), and
	// the subscription would pull on meanwhile, and be redelivered what
	// the lanes hand back (handBackDelay).
	defer context.AfterFunc(ctx, cc.Drain)()
	b := batcher{gate: w.gate, in: msgs, quit: quit, out: out, size: w.cfg.BatchSize, wait: w.cfg.BatchWait, every: w.cfg.AckWait / 3, timer: time.NewTimer(time.Hour)}
	b.timer.Stop()
	// stop ends the subscription at once (its buffered messages go to the
	// ack wait), and batches what msgs holds once no handler can add to it.
	stop := func() {
		cc.Stop()
		stopReading()
		select {
		case <-cc.Closed():
		case <-time.After(drainWait):
		}
		b.rest(msgs)
	}
	// The subscription counts as progress once a message came, or once it
	// has lasted progressAfter and JetStream then says the consumer is
	// there (a subscription whose consumer is gone may go on pulling
	// unanswered for longer). Read here, not in a timer's goroutine, so
	// that it is recorded before consume returns and Run reports its end.
	healthy := time.NewTimer(progressAfter)
	defer healthy.Stop()
	progress := healthy.C
	done := ctx.Done()
	var closed <-chan struct{}   // once draining: closed when the handler has had every message
	var giveUp <-chan time.Time  // once draining: drainWait
	var recheck <-chan time.Time // while the consumer does not answer (stall): when to ask again
	replaced := w.gate.done()    // the usage stream is gone: this worker is done with it
	// ask asks JetStream for the consumer after a missed heartbeat, and
	// again every stallRecheck while it does not answer; it returns the
	// error when the consumer or its stream is gone.
	ask := func() error {
		recheck = nil
		switch err := w.consumerInfo(ctx); {
		case gone(err):
			return err
		case err == nil:
			w.unstall()
		case done != nil && ctx.Err() == nil: // not stopping (a stop cuts the question short)
			w.stall(err)
			recheck = time.After(stallRecheck)
		}
		return nil
	}
	if w.stalled.Load() {
		// A subscription made again while the consumer did not answer
		// (the last one ended meanwhile) asks again as the last did:
		// else an idle worker stayed stalled until an event came.
		recheck = time.After(stallRecheck)
	}
	for {
		select {
		case m := <-msgs:
			if progress != nil {
				w.madeProgress()
				progress = nil
			}
			if w.stalled.Load() {
				w.unstall()
			}
			b.add(m)
		case <-progress:
			progress = nil
			switch err := w.consumerInfo(ctx); {
			case err == nil:
				w.madeProgress()
			case gone(err):
				w.cfg.Logger.Warn("meter: the usage consumer is gone; setting it up again", "err", err)
				w.gate.suspect()
				stop()
				return err
			case done != nil: // no answer: ask again later, unless stopping
				healthy.Reset(progressAfter)
				progress = healthy.C
			}
		case <-b.due():
			b.flush()
		case err := <-ended:
			stop()
			return err
		case <-suspect:
			if err := ask(); err != nil {
				w.cfg.Logger.Warn("meter: the usage consumer is gone (NATS lost its store?); setting it up again", "err", err)
				w.gate.suspect()
				stop()
				return err
			}
		case <-recheck:
			if err := ask(); err != nil {
				w.cfg.Logger.Warn("meter: the usage consumer is gone (NATS lost its store?); setting it up again", "err", err)
				w.gate.suspect()
				stop()
				return err
			}
		case <-replaced:
			// The worker acknowledges nothing more (ackGate): what it is
			// delivered now would wait out its ack wait.
			stop()
			return errStreamReplaced
		case <-done:
			// The server stops delivering, the handler is given what it had
			// sent, and then Closed is.
			cc.Drain()
			done, closed, giveUp = nil, cc.Closed(), time.After(drainWait)
			progress, recheck = nil, nil // stopping is not progress
		case <-closed:
			b.rest(msgs)
			return nil
		case <-giveUp:
			stop()
			return nil
		}
	}
}

// consumerInfo asks JetStream for the worker's consumer, waiting up to 5 s
// for the answer, and returns its error: nil when the consumer is there.
func (w *Worker) consumerInfo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := w.cons.Info(ctx)
	return err
}

// gone reports whether err says the consumer or its stream does not exist.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// drainWait bounds how long a stopping worker waits for its subscription
// to drain (the server's answer to the unsubscribe), and then, if it did
// not, as long again for nats.go to stop calling the handler: a worker
// stops within twice drainWait when NATS does not answer.
const drainWait = 5 * time.Second

// batcher gathers messages from in into batches for out.
type batcher struct {
	gate  *ackGate // holds back the extensions of a gone stream's messages
	in    <-chan jetstream.Msg
	quit  chan struct{} // closed once the subscription is stopping: flush reads no more from in
	out   chan<- []jetstream.Msg
	size  int           // the most events in a batch (a group's count as many)
	wait  time.Duration // the longest a batch waits after its first message
	every time.Duration // how often a batch waiting for out extends its ack wait
	timer *time.Timer   // running while the batch holds messages
	batch []jetstream.Msg
	n     int // the events batch holds: a group counts its events (eventCount)
}

func (b *batcher) add(m jetstream.Msg) {
	if len(b.batch) == 0 {
		// Grown as events come: a light load's batch holds a few, and one
		// of BatchSize (96 KiB at 6,000) per event of a trickle would be
		// most of what an idle worker allocates.
		b.batch = make([]jetstream.Msg, 0, min(b.size, 64))
		b.timer.Reset(b.wait)
	}
	b.batch = append(b.batch, m)
	if b.n += eventCount(m); b.n >= b.size {
		b.flush()
	}
}

// due is ready when the batch has waited its wait: nil (never ready)
// while the batch is empty.
func (b *batcher) due() <-chan time.Time {
	if len(b.batch) == 0 {
		return nil
	}
	return b.timer.C
}

// flush hands the batch over, waiting for out to take it, and returns.
// While it waits (the ledger slow or down), it keeps the batch from its
// ack wait (InProgress every b.every), and reads on from in into the next
// batch, which it keeps alive too: a message left in a channel meanwhile
// was redelivered every ack wait, on to max_deliver in an outage of
// max_deliver ack waits, to be set aside though another worker was
// writing it (a review). It reads short of one batch ahead, and nothing
// once the subscription is stopping: a worker whose writes stall holds
// two batches, not the consumer's max_ack_pending, which would starve the
// workers that can write (a review). What it read is the batch then, its
// wait begun; the next message that fills it flushes it.
func (b *batcher) flush() {
	b.timer.Stop()
	held := b.batch
	b.batch, b.n = nil, 0
	if len(held) == 0 {
		return
	}
	t := time.NewTicker(b.every)
	defer t.Stop()
	var next []jetstream.Msg
	events := 0 // in next
	for {
		in := b.in
		if events >= b.size-1 || isClosed(b.quit) {
			in = nil
		}
		select {
		case b.out <- held:
			if b.batch, b.n = next, events; len(next) > 0 {
				b.timer.Reset(b.wait)
			}
			return
		case m := <-in:
			next = append(next, m)
			events += eventCount(m)
		case <-t.C:
			inProgress(b.gate, held)
			inProgress(b.gate, next)
		}
	}
}

// rest batches what msgs holds now, and flushes.
func (b *batcher) rest(msgs <-chan jetstream.Msg) {
	for {
		select {
		case m := <-msgs:
			b.add(m)
		default:
			b.flush()
			return
		}
	}
}

// consumeEnds reports whether err, from nats.go's Consume, means the
// subscription has ended (nats.go stops it) rather than that it goes on
// (a missed heartbeat, a leadership change, a reconnect, which it
// recovers from by pulling again).
func consumeEnds(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrBadRequest) || errors.Is(err, jetstream.ErrConnectionClosed)
}
