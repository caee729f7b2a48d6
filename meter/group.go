package meter

// Group commit (Publisher.Publish): while one publish waits for its PubAck,
// the events of other requests queue, and the next publish carries them
// all in one JetStream message, which the worker reads back event by event
// (grouped.go).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxGroupEvents and maxGroupBytes bound a group (and the server's
// max_payload, when smaller). A pull of BatchSize messages may then hold
// up to maxGroupEvents times as many events; the worker's batches count
// events (batcher.add).
const (
	maxGroupEvents = 16
	maxGroupBytes  = 256 << 10
)

// groupWaiter is one event waiting to be published in a group.
type groupWaiter struct {
	id    string
	data  []byte
	done  chan error     // the publish's outcome, or errLead
	taken bool           // under grouper.mu: a leader took it into a batch
	batch []*groupWaiter // set before errLead: the batch it is to publish
}

// errLead tells a waiter that the publish before it has ended and it is to
// publish its batch (its own event first).
var errLead = errors.New("meter: lead the next group")

// grouper queues the events that arrive while publishes are in flight.
type grouper struct {
	mu       sync.Mutex
	inflight int // publishes in flight: while any is, new events queue
	queue    []*groupWaiter
}

// publishGrouped publishes data, the encoded event id, alone when no
// publish is in flight, else in a group: the next once a publish in flight
// has its PubAck, or at once when the events queued fill one (so that a
// NATS far away, or a burst, does not hold the events to one group per
// PubAck). It returns when the message carrying it was acknowledged or
// failed (see Publish), or when ctx ends while it still queues.
func (p *Publisher) publishGrouped(ctx context.Context, id string, data []byte) error {
	w := &groupWaiter{id: id, data: data, done: make(chan error, 1)}
	g := &p.group
	g.mu.Lock()
	if g.inflight == 0 {
		g.inflight = 1
		w.batch = []*groupWaiter{w}
		g.mu.Unlock()
	} else {
		g.queue = append(g.queue, w)
		var full []*groupWaiter
		if len(g.queue) >= maxGroupEvents {
			full = p.take()
			g.inflight++
		}
		g.mu.Unlock()
		if full != nil {
			lead(full)
		}
		var err error
		select {
		case err = <-w.done:
		case <-ctx.Done():
			g.mu.Lock()
			if !w.taken {
				if i := indexWaiter(g.queue, w); i >= 0 {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
				}
				g.mu.Unlock()
				return fmt.Errorf("publish event %s: %w", id, ctx.Err())
			}
			g.mu.Unlock()
			err = <-w.done // taken: its data is being published; wait for the outcome
		}
		if err != errLead {
			return err
		}
	}
	errs := p.publishBatch(ctx, w.batch)
	var mine error
	for i, b := range w.batch {
		if b == w {
			mine = errs[i]
		} else {
			b.done <- errs[i]
		}
	}
	// The leader's turn ends: the events queued meanwhile are the next
	// group, led by the first of them, or no publish is in flight.
	g.mu.Lock()
	var next []*groupWaiter
	if len(g.queue) > 0 {
		next = p.take()
	} else {
		g.inflight--
	}
	g.mu.Unlock()
	if next != nil {
		lead(next)
	}
	return mine
}

// take removes the first events of the queue, up to a group's bounds, and
// returns them; p.group.mu is held.
func (p *Publisher) take() []*groupWaiter {
	g := &p.group
	limit := maxGroupBytes
	if mp := p.js.Conn().MaxPayload(); mp > 0 && int(mp)-1024 < limit {
		limit = int(mp) - 1024 // room for the headers
	}
	n, size := 0, 0
	for n < len(g.queue) && n < maxGroupEvents {
		size += len(g.queue[n].data) + 1
		if n > 0 && size > limit {
			break
		}
		g.queue[n].taken = true
		n++
	}
	batch := make([]*groupWaiter, n)
	copy(batch, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	return batch
}

// lead hands batch to its first event's caller, to publish.
func lead(batch []*groupWaiter) {
	batch[0].batch = batch
	batch[0].done <- errLead
}

func indexWaiter(q []*groupWaiter, w *groupWaiter) int {
	for i := range q {
		if q[i] == w {
			return i
		}
	}
	return -1
}

// publishBatch publishes batch, one message for a group of several, and
// returns each event's outcome. A group JetStream refuses as a whole (too
// large for a limit of the server or stream) or drops as a duplicate
// (its first event's id already stored: the others are not) is published
// event by event instead.
func (p *Publisher) publishBatch(ctx context.Context, batch []*groupWaiter) []error {
	errs := make([]error, len(batch))
	if len(batch) == 1 {
		errs[0] = p.PublishData(ctx, batch[0].id, batch[0].data)
		return errs
	}
	dup, err := p.publishGroup(ctx, batch)
	if err == nil && !dup || err != nil && !Permanent(err) {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, b := range batch {
		errs[i] = p.PublishData(ctx, b.id, b.data)
	}
	return errs
}

// publishGroup publishes batch as one message (see HeaderEvents) and
// waits for its PubAck; dup reports that JetStream dropped it as a
// duplicate.
func (p *Publisher) publishGroup(ctx context.Context, batch []*groupWaiter) (dup bool, err error) {
	size := 0
	for _, b := range batch {
		size += len(b.data) + 1
	}
	data := make([]byte, 0, size)
	for i, b := range batch {
		if i > 0 {
			data = append(data, '\n')
		}
		data = append(data, b.data...)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	m := &nats.Msg{Subject: p.subject, Data: data, Header: nats.Header{HeaderEvents: []string{strconv.Itoa(len(batch))}}}
	ack, err := p.js.PublishMsg(ctx, m, jetstream.WithMsgID(batch[0].id), noStreamRetry)
	if err != nil {
		return false, fmt.Errorf("publish %d events from %s: %w", len(batch), batch[0].id, err)
	}
	return ack.Duplicate, nil
}
