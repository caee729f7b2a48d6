package meter

// How the worker reads a group (HeaderEvents): each event is a message of
// its own to the rest of the worker (eventMsg), written, set aside or
// handed back as one; the group's message is acknowledged once all of
// its events are.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// HeaderEvents is set on a usage stream message that carries several
// events (a group): its value is their count, its data their JSON, one
// event a line (JSON holds no raw newline), in the order they queued. Its
// Nats-Msg-Id is its first event's id. A message without it carries one
// event, as every message did before groups.
const HeaderEvents = "Tollgate-Events"

// groupAck is a group's message, acknowledged once each of its events is
// (written, or set aside in the dead-letter stream). Nak and InProgress
// reach it from any of its events: a group handed back is redelivered
// whole, and the ledger skips the events it holds already.
type groupAck struct {
	jetstream.Msg
	left atomic.Int32
}

// eventMsg is one event of a group, as the worker handles it: Data is
// that event's JSON alone, Ack counts the group's acknowledgement down.
type eventMsg struct {
	*groupAck
	data  []byte
	index int // in the group: a dead letter's Nats-Msg-Id names it
}

// Data returns the event's JSON.
func (m *eventMsg) Data() []byte { return m.data }

// Ack acknowledges the event; the group's message once every event of it
// is.
func (m *eventMsg) Ack() error {
	if m.left.Add(-1) == 0 {
		return m.groupAck.Ack()
	}
	return nil
}

// id is the event's id, or "" when its JSON does not decode.
func (m *eventMsg) id() string { return lineID(m.data) }

// lineID is the id of the event whose JSON is line (a group's line), in
// lower case as Normalize writes it, or "" when it does not decode.
func lineID(line []byte) string {
	e, err := usage.Decode(line)
	if err != nil {
		return ""
	}
	return strings.ToLower(e.ID) // all Normalize does to an id
}

// eventCount is how many events m carries, for a batch's count: its
// group's (groupSize), else 1.
func eventCount(m jetstream.Msg) int {
	if n, err := groupSize(m); err == nil && n > 1 {
		return n
	}
	return 1
}

// groupSize reads m's HeaderEvents: 0 when it has none (one event), its
// count when it is a well-formed group (a count of 1 to maxGroupEvents,
// and as many lines), else an error that says what is wrong. It counts
// the lines before a group is split, so a message cannot make the worker
// split more than maxGroupEvents lines.
func groupSize(m jetstream.Msg) (int, error) {
	return groupLines(m.Headers().Get(HeaderEvents), m.Data())
}

// malformedGroup begins the reason of a group set aside whole
// (groupLines): Replay sends such a dead letter back as its events.
const malformedGroup = "malformed group: "

// groupLines is groupSize for a message whose HeaderEvents is h (the
// first value, "" for none) and whose data is data.
func groupLines(h string, data []byte) (int, error) {
	if h == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(h)
	if err != nil || n < 1 || n > maxGroupEvents {
		return 0, fmt.Errorf(malformedGroup+"its %s header is %.40q, not a count of 1 to %d events", HeaderEvents, h, maxGroupEvents)
	}
	if lines := bytes.Count(data, []byte{'\n'}) + 1; lines != n {
		return 0, fmt.Errorf(malformedGroup+"its %s header counts %d events, its data holds %d lines", HeaderEvents, n, lines)
	}
	return n, nil
}

// malformed is a message set aside whole, with why: a group whose header
// and data disagree (groupSize).
type malformed struct {
	msg jetstream.Msg
	why error
}

// ungroup returns msgs with each group's message replaced by its events
// (eventMsg), in order (msgs itself when it holds no group), and apart
// the messages whose group is malformed (groupSize), to be set aside
// whole: no line of them is read as an event.
func ungroup(msgs []jetstream.Msg) (out []jetstream.Msg, bad []malformed) {
	for i, m := range msgs {
		n, err := groupSize(m)
		if n == 0 && err == nil {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil { // the first group: what came before it, as it is
			out = append(make([]jetstream.Msg, 0, len(msgs)+4*(len(msgs)-i)), msgs[:i]...)
		}
		if err != nil {
			bad = append(bad, malformed{msg: m, why: err})
			continue
		}
		g := &groupAck{Msg: m}
		g.left.Store(int32(n))
		data := m.Data()
		for i := range n {
			line := data
			if j := bytes.IndexByte(data, '\n'); j >= 0 {
				line, data = data[:j], data[j+1:]
			}
			out = append(out, &eventMsg{groupAck: g, data: line, index: i})
		}
	}
	if out == nil {
		return msgs, nil
	}
	return out, bad
}
