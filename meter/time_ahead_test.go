package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnEventDatedAheadIsDatedWhenStored (an attacker's review): an event
// dated years ahead by a gateway whose clock ran ahead was charged to the
// balance (and so to the customer's budget) at once, yet listed on no
// statement before its month: the current month's closing balance no
// longer matched the balance. The meter dates an event more than five
// minutes past the time JetStream stored it at that time, recording
// time_ahead_of_receipt; one a minute ahead keeps its time.
func TestAnEventDatedAheadIsDatedWhenStored(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, dbURL := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchWait: 5 * time.Millisecond})
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	now := time.Now().UTC()
	times := []time.Time{now.AddDate(73, 0, 0), now.Add(6 * time.Minute), now.Add(time.Minute)}
	ids := make([]string, len(times))
	for i, at := range times {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: at, CustomerID: uuid.NewString(), KeyID: uuid.NewString(),
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	if n := awaitCount(ledgerCount(t, dbURL), len(ids), 15*time.Second); n != len(ids) {
		t.Fatalf("the ledger holds %d of %d events", n, len(ids))
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i, id := range ids {
		var at time.Time
		var corrections string
		if err := conn.QueryRow(ctx, `SELECT occurred_at, corrections FROM usage_events WHERE id = $1`, id).Scan(&at, &corrections); err != nil {
			t.Fatal(err)
		}
		ahead := i < 2
		if ahead && (at.After(now.Add(time.Minute)) || at.Before(now.Add(-time.Minute)) || corrections != usage.CorrectionTimeAhead) {
			t.Errorf("an event dated %s: stored at %s (%q); want dated when stored, about %s, corrected", times[i], at, corrections, now)
		}
		if !ahead && (!at.Equal(times[i].Truncate(time.Microsecond)) || corrections != "") {
			t.Errorf("an event a minute ahead: stored at %s (%q); want its own time %s", at, corrections, times[i])
		}
	}
}
