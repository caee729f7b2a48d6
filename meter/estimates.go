package meter

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A crashed event is the gateway's estimate of a request it recovered from
// its crash journal after a crash (status crashed). The request's exact
// event, when it was made durable but the journal missed its end, has the
// same id and is before the estimate in the stream: the gateway publishes
// the estimate after a restart, behind its spool (DurablePublisher.
// PublishBehindSpool). JetStream drops the estimate as a duplicate when
// the exact event was stored within the stream's duplicate window before
// it; so an estimate a worker is delivered has no exact event, or one
// stored more than the window before it. The ledger keeps the first event
// of an id it commits, so the estimate must not be committed before that
// exact event, which may be with another worker (waiting out a Postgres
// outage, or dead, its events coming back after the ack wait).
//
// A worker therefore writes an estimate at once when every event stored
// more than the duplicate window before it is acknowledged (the first
// event not acknowledged, just above the consumer's ack floor, is younger
// than that): then any exact event is in the ledger already, and the
// estimate is dropped as its duplicate. That is so but after a backlog
// older than the window, when the estimate is held out of the batches,
// kept from redelivery (InProgress), its condition checked again every
// `every`, and handed back when the worker stops. A run of held estimates
// goes together once the events before the first are acknowledged.

// A group (HeaderEvents) is stored under its first event's id alone, so
// JetStream does not drop an estimate of any other of its events: before
// writing an estimate under the window's rule, the worker reads the
// groups stored from the first event not acknowledged up to the estimate,
// and holds it while one of them carries its id (clearOfGroups); a
// malformed group, which the worker sets aside whole, carries none.

// maxGroupScan bounds the messages clearOfGroups reads for one check: an
// estimate behind more unacknowledged messages than that is held until the
// ack floor comes nearer.
const maxGroupScan = 2000

// estimates are the crashed events a worker holds, with their stream
// sequences and times, index for index.
type estimates struct {
	pending
	seqs  []uint64
	times []time.Time
	every time.Duration // how often a held estimate's condition is checked
	timer *time.Timer   // set while events are held
	// since is when events began to be held without a break (zero while
	// none is), and warned whether that was logged (heldWarning).
	since  time.Time
	warned bool
	// reported is how many held events the observer was told of.
	reported int
}

// report tells o of the change in the events e holds since the last
// report.
func (e *estimates) report(o Observer) {
	if n := len(e.events); n != e.reported {
		o.EstimatesHeld(n - e.reported)
		e.reported = n
	}
}

// heldWarnWindows is how many duplicate windows estimates are held
// without a break before the worker logs it, once (heldWarning): longer
// than a backlog older than the window usually takes to clear, and the
// sign of an ack floor that does not move.
const heldWarnWindows = 5

// hold moves the crashed events of p into e, and returns the others (p
// itself, not copied, when it has none: the common case).
func (e *estimates) hold(p pending) pending {
	if !hasCrashed(p.events) {
		return p
	}
	out := pending{events: p.events[:0:0], msgs: p.msgs[:0:0]}
	for i := range p.events {
		if p.events[i].Status == usage.StatusCrashed {
			if md, err := p.msgs[i].Metadata(); err == nil {
				e.events = append(e.events, p.events[i])
				e.msgs = append(e.msgs, p.msgs[i])
				e.seqs = append(e.seqs, md.Sequence.Stream)
				e.times = append(e.times, md.Timestamp)
				continue
			}
		}
		out.events = append(out.events, p.events[i])
		out.msgs = append(out.msgs, p.msgs[i])
	}
	return out
}

func hasCrashed(events []usage.Event) bool {
	for i := range events {
		if events[i].Status == usage.StatusCrashed {
			return true
		}
	}
	return false
}

// recheck fires when the held events' condition is to be checked again;
// never while none is held.
func (e *estimates) recheck() <-chan time.Time {
	if e.timer == nil {
		return nil
	}
	return e.timer.C
}

// release returns the held events that may be written now (see
// estimates), keeping the others from redelivery and arming e's timer for
// them. Without an answer from JetStream it releases none.
func (w *Worker) release(ctx context.Context, e *estimates) pending {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	var out pending
	if info, err := w.cons.Info(ctx); err == nil {
		sort.Sort(bySeq{e})
		// The first event not acknowledged: the first the stream still
		// holds past the ack floor. The sequence just past the floor may be
		// gone (deleted, or lost with a NATS store restarted after a kill,
		// the consumer's state older than the stream's): read there, the
		// estimates were held for good.
		next := info.AckFloor.Stream + 1
		first, err := w.usage.GetMsg(ctx, next, jetstream.WithGetMsgSubject(">"))
		if err != nil { // a server without next_by_subj (an older nats-server): at least past the stream's first
			if si, ierr := w.usage.Info(ctx); ierr == nil && si.State.FirstSeq > next {
				next = si.State.FirstSeq
				first, err = w.usage.GetMsg(ctx, next)
			}
		}
		if err == nil {
			next = first.Sequence
		}
		n := 0
		for n < len(e.seqs) && e.seqs[n] <= next {
			next = max(next, e.seqs[n]+1)
			n++
		}
		if n < len(e.seqs) && err == nil {
			// The estimates stored within the duplicate window after it:
			// the window the worker read at its start or, when the stream's
			// is shorter now (edited by an operator), that one.
			window := w.dupWindow
			if si, ierr := w.usage.Info(ctx); ierr == nil {
				window = min(window, si.Config.Duplicates)
			}
			m := n
			for m < len(e.seqs) && !e.times[m].After(first.Time.Add(window)) {
				m++
			}
			n = w.clearOfGroups(ctx, first.Sequence, e, n, m)
		}
		out = pending{events: e.events[:n:n], msgs: e.msgs[:n:n]}
		e.events, e.msgs, e.seqs, e.times = e.events[n:], e.msgs[n:], e.seqs[n:], e.times[n:]
		if err == nil {
			w.heldWarning(e, info, first)
		}
	}
	if len(e.events) == 0 {
		e.since, e.warned = time.Time{}, false
	} else if e.since.IsZero() {
		e.since = time.Now()
	}
	e.report(w.obs)
	inProgress(w.gate, e.msgs)
	if len(e.events) > 0 {
		e.timer = time.NewTimer(e.every)
	}
	return out
}

// heldWarning logs at WARN, once for each time estimates are held
// without a break, that e's have been held heldWarnWindows duplicate
// windows: nothing else tells of them (they are in neither the ledger nor
// the dead-letter stream), and a crash review saw them held for good
// behind an ack floor nats-server 2.9.10 left at 0 after repeated kills.
// first is the first event not acknowledged, as release read it.
func (w *Worker) heldWarning(e *estimates, info *jetstream.ConsumerInfo, first *jetstream.RawStreamMsg) {
	if len(e.events) == 0 || e.warned || e.since.IsZero() || time.Since(e.since) < heldWarnWindows*w.dupWindow {
		return
	}
	e.warned = true
	w.cfg.Logger.Warn("meter: crash estimates held, waiting for the events stored before them to be acknowledged "+
		"(normal while a backlog older than the duplicate window waits for the ledger; with none, the consumer's ack "+
		"floor is not moving: see docs/configuration.md on NATS versions)",
		"estimates", len(e.events), "held_for", time.Since(e.since).Round(time.Second), "first_held_seq", e.seqs[0],
		"first_unacknowledged_seq", first.Sequence, "first_unacknowledged_stored", first.Time.UTC(),
		"ack_floor", info.AckFloor.Stream, "ack_pending", info.NumAckPending, "delivered", info.Delivered.Stream)
}

// bySeq sorts held events by their stream sequence.
type bySeq struct{ *estimates }

func (s bySeq) Len() int           { return len(s.seqs) }
func (s bySeq) Less(i, j int) bool { return s.seqs[i] < s.seqs[j] }
func (s bySeq) Swap(i, j int) {
	s.seqs[i], s.seqs[j] = s.seqs[j], s.seqs[i]
	s.times[i], s.times[j] = s.times[j], s.times[i]
	s.events[i], s.events[j] = s.events[j], s.events[i]
	s.msgs[i], s.msgs[j] = s.msgs[j], s.msgs[i]
}

// clearOfGroups returns how many of e's held estimates n..m-1 (in stream
// order, each within the duplicate window of from, the first message not
// acknowledged) may be written: those before the first whose id a group
// stored from `from` up to it carries (that group not written yet, its
// exact event would lose to the estimate in the ledger), or that it could
// not check (JetStream did not answer, or maxGroupScan was reached).
func (w *Worker) clearOfGroups(ctx context.Context, from uint64, e *estimates, n, m int) int {
	if n >= m {
		return n
	}
	grouped := map[string]uint64{} // event id -> the stream sequence of the group carrying it
	seq, read := from, 0
	for seq < e.seqs[m-1] && read < maxGroupScan {
		msg, err := w.usage.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			seq = e.seqs[m-1] // nothing stored after seq
			break
		}
		if err != nil {
			break
		}
		read++
		// A malformed group (groupLines) is set aside whole by the
		// worker, none of its lines written: not split, however many
		// lines it holds.
		if n, err := groupLines(msg.Header.Get(HeaderEvents), msg.Data); err == nil && n > 0 {
			for _, line := range bytes.Split(msg.Data, []byte{'\n'}) {
				if ev, err := usage.Decode(line); err == nil {
					ev.Normalize()
					if _, ok := grouped[ev.ID]; !ok {
						grouped[ev.ID] = msg.Sequence
					}
				}
			}
		}
		seq = msg.Sequence + 1
	}
	for i := n; i < m; i++ {
		if s, ok := grouped[e.events[i].ID]; seq < e.seqs[i] || ok && s < e.seqs[i] {
			return i
		}
	}
	return m
}
