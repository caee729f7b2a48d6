package meter_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestReplayChecksEveryNamedLetterBeforeSendingAny: a replay naming a
// letter that replays and, after it, a cut group that cannot is refused
// whole: nothing is sent and both letters stay (Replay's contract). With
// the unreplayable letter first (as TestReplayRefusesACutGroup has it)
// the check up front was never needed: a mutant without it survived,
// and replayed the letters before the cut group, then refused.
func TestReplayChecksEveryNamedLetterBeforeSendingAny(t *testing.T) {
	ctx, _, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).PublishData(ctx, uuid.NewString(), []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	poison := waitLetters(t, ctx, dlq, 1)[0].Seq
	customer := uuid.NewString()
	cut := setAsideGroup(t, ctx, js, dlq, "5", bytes.Join([][]byte{encodeEvent(t, groupEvent(customer, 1)),
		encodeEvent(t, groupEvent(customer, 2)), bytes.Repeat([]byte("x"), 600<<10)}, []byte{'\n'}))
	before := usageLastSeq(t, ctx, js)
	n, err := dlq.Replay(ctx, []uint64{poison, cut.Seq})
	var conflict interface{ Conflict() bool }
	if !errors.As(err, &conflict) || n != 0 {
		t.Fatalf("Replay(%d, %d) = %d, %v; want a conflict and none replayed", poison, cut.Seq, n, err)
	}
	if after := usageLastSeq(t, ctx, js); after != before {
		t.Errorf("the refused replay stored %d messages; want none", after-before)
	}
	if left, err := dlq.List(ctx, 0, 10); err != nil || len(left) != 2 {
		t.Errorf("dead letters after the refused replay: %d, %v; want both", len(left), err)
	}
}
