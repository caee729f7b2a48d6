package meter_test

import (
	"testing"
)

// TestReplayOfAGroupSendsEachLineWithoutAnID: a malformed group's lines
// that are no event (no id to name them) go back a message each, each
// under a Nats-Msg-Id of its own (the line's index): the worker sets each
// aside again. A mutant naming them all alike survived every other test,
// and JetStream dropped every line after the first as a duplicate: their
// bytes, kept nowhere else, were gone.
func TestReplayOfAGroupSendsEachLineWithoutAnID(t *testing.T) {
	ctx, _, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	letter := setAsideGroup(t, ctx, js, dlq, "5", []byte("not an event\nnor this"))
	before := usageLastSeq(t, ctx, js)
	if n, err := dlq.Replay(ctx, []uint64{letter.Seq}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want the one dead letter", n, err)
	}
	if after := usageLastSeq(t, ctx, js); after-before != 2 {
		t.Fatalf("the replay stored %d messages; want 2, a line each", after-before)
	}
}
