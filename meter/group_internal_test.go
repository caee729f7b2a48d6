package meter

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAQueuedEventWhoseContextEndsLeavesTheQueue: an event queued behind
// a publish in flight whose context ends before a leader takes it returns
// the context's error and leaves the queue: no later group carries it
// (its caller spools it; its buffer goes back to the pool).
func TestAQueuedEventWhoseContextEndsLeavesTheQueue(t *testing.T) {
	p := &Publisher{}
	p.group.inflight = 1 // a publish is in flight
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.publishGrouped(ctx, "0197a3c2-1111-7222-8333-000000000001", []byte(`{}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish = %v, want the context's deadline", err)
	}
	if len(p.group.queue) != 0 {
		t.Fatalf("queue holds %d events after its only one gave up", len(p.group.queue))
	}
}
