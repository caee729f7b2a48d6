package gateway

import (
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// How often a stream is checkpointed in the crash journal: after this many
// upstream events or this long, whichever comes first, and whenever the
// relay has read every event the upstream has sent so far (waiting). A
// crash loses at most the output of the events since the last checkpoint
// (see docs/operations.md, "What a crash can lose").
const (
	checkpointEvents   = 16
	checkpointInterval = 20 * time.Millisecond
)

// checkpoint is an exchange's journaling state.
type checkpoint struct {
	at      time.Duration // of the last checkpoint, since the exchange's start (0: the start)
	events  int           // upstream events since
	outAt   int           // report.Output's length at the last checkpoint
	thinkAt int           // report.Reasoning's length at the last checkpoint
}

// progress counts an upstream event and checkpoints when one is due.
func (x *exchange) progress() {
	x.ck.events++
	// touch has just taken the time: the event's, since the start
	if x.ck.events < checkpointEvents && time.Duration(x.lastEvent.Load())-x.ck.at < checkpointInterval {
		return
	}
	x.checkpoint()
}

// waiting checkpoints the events not yet journaled when the relay is about
// to wait for the upstream's next bytes: a burst of fewer than
// checkpointEvents events, then a pause (a model thinking), was journaled
// only with the event after it, and a crash in the pause lost the burst
// (a crash review). A stream whose events come one read at a time is
// journaled at each; the journal buffers the records (Journal.Checkpoint).
func (x *exchange) waiting() {
	if x.ck.events > 0 {
		x.checkpoint()
	}
}

// checkpoint journals the output streamed since the last checkpoint (and
// apart, the reasoning shown among it) and the provider's usage report so
// far. The text is journaled as it is, not
// counted: the tokenizer runs only at recovery.
func (x *exchange) checkpoint() {
	r := &x.report
	out, thought := r.Output.String()[x.ck.outAt:], r.Reasoning.String()[x.ck.thinkAt:]
	var rep *usage.Tokens
	if r.Reported {
		u := r.Usage
		rep = &u
	}
	x.ck.at, x.ck.events, x.ck.outAt, x.ck.thinkAt = time.Since(x.start), 0, r.Output.Len(), r.Reasoning.Len()
	x.s.journal.Checkpoint(x.event.ID, out, thought, rep, r.ReasoningShown)
}
