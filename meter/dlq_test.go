package meter_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestPoisonGoesToDeadLetterAndReplays: an undecodable message and an
// event the ledger cannot rate are set aside with their reasons, the rest
// of their batch is written, and a replay (after the fix) stores them.
func TestPoisonGoesToDeadLetterAndReplays(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 50})
	c, _ := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "c"})
	k, _, _ := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if _, err := store.CreatePrice(ctx, ledger.PriceInput{Model: "huge", Currency: "USD", Input: "1", Output: "4000000000000",
		EffectiveFrom: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	event := func(model string, completion int64) *usage.Event {
		return &usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: c.ID, KeyID: k.ID,
			Provider: "p", Model: model, Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{CompletionTokens: completion}}
	}
	overflow := event("huge", usage.MaxCount) // its cost does not fit in int64
	for _, e := range []*usage.Event{event("m", 1), overflow, event("m", 2)} {
		if err := pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "tollgate.usage.v1", []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var letters []usage.DeadLetter
	for deadline := time.Now().Add(10 * time.Second); len(letters) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		letters, _ = dlq.List(ctx, 0, 10)
	}
	if len(letters) != 2 || !strings.Contains(letters[0].Reason+letters[1].Reason, "schema version 99") ||
		!strings.Contains(letters[0].Reason+letters[1].Reason, "overflows") {
		t.Fatalf("dead letters = %+v", letters)
	}
	// The reason says once what is wrong: "undecodable or invalid usage
	// event: schema version 99, want 1", as tollgate dlq list shows it.
	for _, l := range letters {
		if strings.Count(l.Reason, "invalid usage event") > 1 {
			t.Errorf("dead letter %d's reason repeats itself: %q", l.Seq, l.Reason)
		}
	}
	waitUsage(t, store, c.ID, 2) // the good events of the batch
	// Fix the price (a new version), then replay the overflowing event.
	var seq uint64
	for _, l := range letters {
		if l.EventID == overflow.ID {
			seq = l.Seq
		}
	}
	if _, err := store.CreatePrice(ctx, ledger.PriceInput{Model: "huge", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := dlq.Replay(ctx, []uint64{seq}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	if _, err := store.Event(ctx, overflow.ID); err != nil {
		for deadline := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			_, err = store.Event(ctx, overflow.ID)
		}
		if err != nil {
			t.Fatalf("replayed event not stored: %v", err)
		}
	}
	left, _ := dlq.List(ctx, 0, 10)
	if len(left) != 1 {
		t.Fatalf("after replay %d dead letters remain, want the undecodable one", len(left))
	}
	// Replayed unfixed, it is set aside again: from a new stream message,
	// so the dead-letter stream's duplicate window (dead letters carry a
	// message id) keeps it rather than dropping it as a resend.
	if n, err := dlq.Replay(ctx, []uint64{left[0].Seq}); err != nil || n != 1 {
		t.Fatalf("Replay of the undecodable one = %d, %v", n, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left, _ = dlq.List(ctx, 0, 10); len(left) == 1 && left[0].Seq != letters[0].Seq && left[0].Seq != letters[1].Seq {
			return
		}
	}
	t.Fatalf("the undecodable event replayed is not set aside again: dead letters %+v", left)
}

// TestSeveralWorkersGiveExactTotals: three workers share one durable
// consumer; every event is stored exactly once.
func TestSeveralWorkersGiveExactTotals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	var workers []<-chan error
	for range 3 {
		workers = append(workers, metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 37}))
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer, key := uuid.NewString(), uuid.NewString()
	const n = 3000
	var pwg sync.WaitGroup
	for p := range 4 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := p; i < n; i += 4 {
				e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
					Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
					Usage: usage.Tokens{PromptTokens: int64(i), CompletionTokens: 1}}
				if err := pub.Publish(ctx, &e); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 { // and a republish of the same id
					_ = pub.Publish(ctx, &e)
				}
			}
		}()
	}
	pwg.Wait()
	row := waitUsage(t, store, customer, n)
	if row.PromptTokens != n*(n-1)/2 || row.CompletionTokens != n {
		t.Fatalf("usage = %+v, want %d prompt tokens", row, n*(n-1)/2)
	}
	cancel()
	for _, done := range workers {
		<-done
	}
}
