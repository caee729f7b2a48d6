package meter

import (
	"context"
	"sort"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A crashed event is the gateway's estimate of a request it recovered from
// its crash journal after a crash (status crashed). The request's exact
// event, when it was made durable but the journal missed its end, has the
// same id and is before the estimate in the stream: the gateway publishes
// the estimate after a restart, behind its spool (DurablePublisher.
// PublishBehindSpool). JetStream drops the estimate as a duplicate within
// the stream's duplicate window only; past it both are in the stream. The
// ledger keeps the first event of an id it commits, so the estimate must
// not be committed before the exact event: but a worker may get the
// estimate first, when the exact event was delivered to another worker
// (that is waiting out a Postgres outage, or died and its events come back
// after the ack wait) or handed back. So a worker holds each crashed event
// it is delivered, out of its batches, until every event before it in the
// stream is acknowledged (the consumer's ack floor is just below it, or
// below the first of a run of held estimates): the exact event, if there
// is one, is then in the ledger, and the estimate is dropped as its
// duplicate. Held events are kept from redelivery (InProgress) and are
// handed back when the worker stops.

// estimates are the crashed events a worker holds, with their stream
// sequences, index for index.
type estimates struct {
	pending
	seqs  []uint64
	every time.Duration // how often the ack floor is checked
	timer *time.Timer   // set while events are held
}

// hold moves the crashed events of p into e, and returns the others.
func (e *estimates) hold(p pending) pending {
	out := pending{events: p.events[:0:0], msgs: p.msgs[:0:0]}
	for i := range p.events {
		if p.events[i].Status == usage.StatusCrashed {
			if md, err := p.msgs[i].Metadata(); err == nil {
				e.events = append(e.events, p.events[i])
				e.msgs = append(e.msgs, p.msgs[i])
				e.seqs = append(e.seqs, md.Sequence.Stream)
				continue
			}
		}
		out.events = append(out.events, p.events[i])
		out.msgs = append(out.msgs, p.msgs[i])
	}
	if len(e.events) > 0 && e.timer == nil {
		e.timer = time.NewTimer(e.every)
	}
	if len(out.events) == len(p.events) {
		return p
	}
	return out
}

// recheck fires when the held events' ack floor is to be checked; never
// while none is held.
func (e *estimates) recheck() <-chan time.Time {
	if e.timer == nil {
		return nil
	}
	return e.timer.C
}

// release keeps the held events from redelivery and returns those every
// event before which in the stream is acknowledged, or held here with them
// (see estimates), for the worker to write.
func (w *Worker) release(ctx context.Context, e *estimates) pending {
	e.timer = nil
	for _, m := range e.msgs {
		_ = m.InProgress()
	}
	var out pending
	if info, err := w.cons.Info(ctx); err == nil {
		sort.Sort(bySeq{e})
		next := info.AckFloor.Stream + 1 // the first event not acknowledged
		n := 0
		for n < len(e.seqs) && e.seqs[n] <= next {
			next = max(next, e.seqs[n]+1)
			n++
		}
		out = pending{events: e.events[:n:n], msgs: e.msgs[:n:n]}
		e.events, e.msgs, e.seqs = e.events[n:], e.msgs[n:], e.seqs[n:]
	}
	if len(e.events) > 0 {
		e.timer = time.NewTimer(e.every)
	}
	return out
}

// bySeq sorts held events by their stream sequence.
type bySeq struct{ *estimates }

func (s bySeq) Len() int           { return len(s.seqs) }
func (s bySeq) Less(i, j int) bool { return s.seqs[i] < s.seqs[j] }
func (s bySeq) Swap(i, j int) {
	s.seqs[i], s.seqs[j] = s.seqs[j], s.seqs[i]
	s.events[i], s.events[j] = s.events[j], s.events[i]
	s.msgs[i], s.msgs[j] = s.msgs[j], s.msgs[i]
}
