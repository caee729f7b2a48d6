package meter

// How a pulled batch reaches the write lanes (Worker.Run): split by
// customer, handed over in order, its messages' ack wait extended while
// it waits, and handed back or awaited as Run decides.

import (
	"context"
	"hash/maphash"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sethvargo/go-retry"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// notHeld is over without the messages whose stream sequence one of held
// has: a crashed estimate held back (estimates) that came again; the held
// delivery is written, or handed back, as estimates decide.
func notHeld(over, held []jetstream.Msg) []jetstream.Msg {
	if len(held) == 0 {
		return over
	}
	seqs := make(map[uint64]bool, len(held))
	for _, m := range held {
		if md, err := m.Metadata(); err == nil {
			seqs[md.Sequence.Stream] = true
		}
	}
	return slices.DeleteFunc(over, func(m jetstream.Msg) bool {
		md, err := m.Metadata()
		return err == nil && seqs[md.Sequence.Stream]
	})
}

// await returns once every channel in chans is closed, keeping msgs' ack
// wait from running out meanwhile (InProgress every `every`).
func await(g *ackGate, chans []chan struct{}, msgs []jetstream.Msg, every time.Duration) {
	if len(chans) == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for _, c := range chans {
		for open := true; open; {
			select {
			case <-c:
				open = false
			case <-t.C:
				inProgress(g, msgs)
			}
		}
	}
}

// handOut hands ds to the lanes (see Run) and returns the parts in flight,
// those before it that are not written yet and its own.
func (w *Worker) handOut(ds pending, lanes []chan pending, inFlight []chan struct{}, wasWhole *bool, seed maphash.Seed) []chan struct{} {
	inFlight = slices.DeleteFunc(slices.Clone(inFlight), isClosed)
	if len(ds.events) == 0 {
		return inFlight
	}
	whole := len(lanes) == 1 || len(ds.events) < splitAt
	var after []chan struct{}
	if len(lanes) > 1 && (whole || *wasWhole) {
		// A batch written whole touches every lane's customers: it
		// waits for the lanes to be idle, and the next batch for it.
		after = inFlight
	}
	*wasWhole = whole
	for i, p := range split(ds, len(lanes), whole, seed) {
		if len(p.events) > 0 {
			p.done = make(chan struct{})
			handOver(w.gate, lanes[i], p, p.msgs, w.cfg.AckWait/3, after...)
			after = nil
			inFlight = append(inFlight, p.done)
		}
	}
	return inFlight
}

// newBackoff is the meter's wait between retries: 100 ms, then twice as
// long each time, up to limit.
func newBackoff(limit time.Duration) retry.Backoff {
	return retry.WithCappedDuration(limit, retry.NewExponential(100*time.Millisecond))
}

// splitAt is the smallest batch split between the write lanes. A smaller
// batch is written in one transaction: split, it would cost Postgres more
// per event (each transaction has its fixed work, and fewer events share
// each rollup row) for parallelism that a light load does not need.
// BenchmarkMeterLag at 5,000 events/s, batches of 150-280 events, p99 lag
// 606-739 ms split in two against 284-321 ms whole.
const splitAt = 1000

// handOver sends v, which holds msgs, to the next stage once every
// channel in after is closed, keeping the messages' ack wait from running
// out (InProgress every `every`) while that stage is busy (retrying a
// batch through a Postgres outage, say): a batch waiting here is not
// redelivered, and so cannot reach MaxDeliver while nothing is wrong with
// it. The channels it sends on are unbuffered, so that a batch is always
// here or with the stage that extends it (the batcher's flush, write's
// retries), never in a buffer between them.
func handOver[T any](g *ackGate, out chan<- T, v T, msgs []jetstream.Msg, every time.Duration, after ...chan struct{}) {
	await(g, after, msgs, every) // then a new ticker: at most 2 × every between two extensions
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case out <- v:
			return
		case <-t.C:
			inProgress(g, msgs)
		}
	}
}

// inProgress extends the ack wait of msgs, unless g holds their
// acknowledgements back (an extension of a gone stream's message would
// delay the redelivery of the new event at its sequence).
func inProgress(g *ackGate, msgs []jetstream.Msg) {
	if len(msgs) == 0 || !g.live(context.Background()) {
		return
	}
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// split lays a batch out in n parts, by a hash of its events'
// customer_id under seed, or all of it in the first when whole (not
// copied).
func split(b pending, n int, whole bool, seed maphash.Seed) []pending {
	parts := make([]pending, n)
	if whole {
		parts[0] = b
		return parts
	}
	// Each part is made at its size: appending to empty parts grew them
	// by doubling, copying each event (a few hundred bytes) about twice
	// more, 8% of the worker's CPU on a backlog (BENCHMARKS.md, stop 36).
	lane := make([]int, len(b.events))
	sizes := make([]int, n)
	for j := range b.events {
		lane[j] = int(maphash.String(seed, b.events[j].CustomerID) % uint64(n))
		sizes[lane[j]]++
	}
	for i := range parts {
		parts[i].events = make([]usage.Event, 0, sizes[i])
		parts[i].msgs = make([]jetstream.Msg, 0, sizes[i])
	}
	for j, i := range lane {
		parts[i].events = append(parts[i].events, b.events[j])
		parts[i].msgs = append(parts[i].msgs, b.msgs[j])
	}
	return parts
}

// isClosed reports whether c is closed (c is only ever closed, never sent on).
func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// handBack gives a stopping worker's messages back (Nak), to be
// redelivered to any worker after handBackDelay.
func handBack(g *ackGate, msgs []jetstream.Msg) {
	if len(msgs) == 0 || !g.live(context.Background()) {
		return // a gone stream's (nothing to redeliver), or not known yet: redelivered after the ack wait
	}
	for _, m := range msgs {
		_ = m.NakWithDelay(handBackDelay)
	}
}

// handBackDelay is how long a message handed back waits to be redelivered:
// past the stopping worker's drain (at most twice drainWait). Handed back
// to be redelivered at once, it went to the worker's own subscription,
// still draining, which could not write it either (Postgres down), and
// back, round and round, past max_deliver into the dead-letter stream
// (a review).
const handBackDelay = 2 * drainWait

// pending is a part of a batch not yet written: its events and their
// messages, index for index.
type pending struct {
	events []usage.Event
	msgs   []jetstream.Msg
	done   chan struct{} // closed by the lane when the part is written
}

func (p pending) without(i int) pending {
	return pending{events: append(p.events[:i:i], p.events[i+1:]...), msgs: append(p.msgs[:i:i], p.msgs[i+1:]...)}
}
