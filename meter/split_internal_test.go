package meter

import (
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// splitBatch is a batch of n events for customers customers, each event's
// message a distinct placeholder (split only carries messages along).
func splitBatch(n, customers int) pending {
	b := pending{events: make([]usage.Event, n), msgs: make([]jetstream.Msg, n)}
	for j := range b.events {
		b.events[j].ID = fmt.Sprintf("e%d", j)
		b.events[j].CustomerID = fmt.Sprintf("c%d", j%customers)
		b.msgs[j] = &placeholderMsg{id: j}
	}
	return b
}

// placeholderMsg is a jetstream.Msg that split moves and nothing calls.
type placeholderMsg struct {
	jetstream.Msg
	id int
}

// Every event lands in exactly one part, with its own message, in the
// batch's order; a customer's events all land in one part; the parts are
// made at their size.
func TestSplitKeepsEventsMessagesAndOrder(t *testing.T) {
	seed := maphash.MakeSeed()
	b := splitBatch(5000, 37)
	parts := split(b, 3, false, seed)
	if len(parts) != 3 {
		t.Fatalf("%d parts, want 3", len(parts))
	}
	laneOf := map[string]int{}
	total := 0
	for i, p := range parts {
		if len(p.events) != len(p.msgs) {
			t.Fatalf("part %d: %d events, %d messages", i, len(p.events), len(p.msgs))
		}
		if cap(p.events) != len(p.events) || cap(p.msgs) != len(p.msgs) {
			t.Errorf("part %d: capacity %d/%d for %d events: not made at its size", i, cap(p.events), cap(p.msgs), len(p.events))
		}
		last := -1
		for j, e := range p.events {
			var at int
			fmt.Sscanf(e.ID, "e%d", &at)
			if got := p.msgs[j].(*placeholderMsg).id; got != at {
				t.Fatalf("part %d: event %s carries message %d", i, e.ID, got)
			}
			if at <= last {
				t.Fatalf("part %d: event %d after event %d", i, at, last)
			}
			last = at
			if l, seen := laneOf[e.CustomerID]; seen && l != i {
				t.Fatalf("customer %s in parts %d and %d", e.CustomerID, l, i)
			}
			laneOf[e.CustomerID] = i
		}
		total += len(p.events)
	}
	if total != len(b.events) || len(laneOf) != 37 {
		t.Fatalf("%d events for %d customers in the parts, want 5000 for 37", total, len(laneOf))
	}

	whole := split(b, 3, true, seed)
	if len(whole[0].events) != 5000 || &whole[0].events[0] != &b.events[0] || len(whole[1].events)+len(whole[2].events) != 0 {
		t.Fatal("a whole batch is not the first part, uncopied")
	}
	if empty := split(pending{}, 2, false, seed); len(empty[0].events)+len(empty[1].events) != 0 {
		t.Fatal("an empty batch made events")
	}
}

// BenchmarkSplit lays out a backlog's batch (6,000 events, 1,000
// customers) in the default two write lanes; ns/op is per batch.
func BenchmarkSplit(b *testing.B) {
	seed := maphash.MakeSeed()
	batch := splitBatch(6000, 1000)
	b.ReportAllocs()
	for b.Loop() {
		split(batch, 2, false, seed)
	}
}
