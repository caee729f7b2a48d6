package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestSetAsideCutShortByAStopLeavesThePoisonUnacknowledged: a worker
// stopping before the dead-letter stream took a poison message (its
// PubAck not yet in: the dead-letter stream unreachable, or the stop
// arriving first) must not acknowledge the message: acknowledged, it is
// in neither stream, an event gone with no reason anywhere. It is handed
// back, and the next worker sets it aside.
func TestSetAsideCutShortByAStopLeavesThePoisonUnacknowledged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{AckWait: time.Second}
	first, cons, b := fetchPoison(t, ctx, js, store, cfg)
	stopped, stop := context.WithCancel(ctx)
	stop() // the worker is stopping: the dead letter's publish is not made
	got := 0
	for m := range b.Messages() {
		meter.SetAside(first, stopped, m, "undecodable (a stopping worker)")
		got++
	}
	if got != 1 {
		t.Fatalf("fetched %d messages, want the poison", got)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 0 {
		t.Fatalf("the poison was acknowledged with no dead letter made: ack floor %+v", info.AckFloor)
	}
	metertest.StartWorker(t, ctx, js, store, cfg) // gets it back once handed back
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The hand-back delays its redelivery by twice the drain wait (10 s).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		letters, err := dlq.List(ctx, 0, 10)
		if err == nil && len(letters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute the dead-letter stream holds %d letters (err %v), want the poison once", len(letters), err)
		}
	}
}
