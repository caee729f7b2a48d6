package meter_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestAFailedReplayKeepsTheDeadLetter: a dead letter (here an event the
// gateway made invalid, set aside through the dead-letter spool) replayed
// while its publish fails (no usage stream answers) must stay in the
// dead-letter stream, and the replay report the error: a mutant of
// replayLetters that went on past the failed publish removed the letter,
// and counted it replayed, so the event was lost for good (it survived
// every other test).
func TestAFailedReplayKeepsTheDeadLetter(t *testing.T) {
	ctx := context.Background()
	js := metertest.Connect(t, metertest.NewServer(t)) // no usage stream
	spool, dead := openSpool(t), openSpool(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	d := meter.NewDurablePublisher(pub, spool, dead, func() bool { return true }, 0, slog.Default(), nil)
	bad := testEvent(1)
	bad.KeyID = "not-a-uuid"
	if err := d.Publish(ctx, bad); err != nil {
		t.Fatal(err)
	}
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	dlq := mustDLQ(t, js)
	letters := waitLetters(t, ctx, dlq, 1)
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].EventID != bad.ID || !strings.Contains(letters[0].Reason, "invalid usage event") {
		t.Fatalf("dead letters %+v; want the event set aside", letters)
	}
	if n, err := dlq.Replay(ctx, nil); err == nil || n != 0 {
		t.Fatalf("Replay with no usage stream = %d, %v; want an error and none replayed", n, err)
	}
	if left, err := dlq.List(ctx, 0, 10); err != nil || len(left) != 1 {
		t.Fatalf("dead letters after the failed replay: %d, %v; want the letter kept", len(left), err)
	}
}
