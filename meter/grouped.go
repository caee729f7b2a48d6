package meter

// How the worker reads a group (HeaderEvents): each event is a message of
// its own to the rest of the worker (eventMsg), written, set aside or
// handed back as one; the group's message is acknowledged once all of
// its events are.

import (
	"bytes"
	"strconv"
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
func (m *eventMsg) id() string {
	e, err := usage.Decode(m.data)
	if err != nil {
		return ""
	}
	e.Normalize()
	return e.ID
}

// eventCount is how many events m carries: HeaderEvents's count for a
// group, else 1.
func eventCount(m jetstream.Msg) int {
	if h := m.Headers().Get(HeaderEvents); h != "" {
		if n, err := strconv.Atoi(h); err == nil && n > 1 {
			return n
		}
	}
	return 1
}

// ungroup returns msgs with each group's message replaced by its events
// (eventMsg), in order; msgs itself when it holds no group.
func ungroup(msgs []jetstream.Msg) []jetstream.Msg {
	n := 0
	for _, m := range msgs {
		if m.Headers().Get(HeaderEvents) != "" {
			n++
		}
	}
	if n == 0 {
		return msgs
	}
	out := make([]jetstream.Msg, 0, len(msgs)+n*4)
	for _, m := range msgs {
		if m.Headers().Get(HeaderEvents) == "" {
			out = append(out, m)
			continue
		}
		lines := bytes.Split(m.Data(), []byte{'\n'})
		g := &groupAck{Msg: m}
		g.left.Store(int32(len(lines)))
		for i, l := range lines {
			out = append(out, &eventMsg{groupAck: g, data: l, index: i})
		}
	}
	return out
}
