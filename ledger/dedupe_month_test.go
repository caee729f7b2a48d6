package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnEventAgainInAnotherMonthIsStoredOnce: the same event id written
// again with a time in the next month (a resend the worker dated by its
// JetStream time, the gateway's clock having been ahead: see
// usage.Event.NotAheadOf) lands in another partition, where the partition's
// own primary key does not see the first. The ledger still stores it once:
// only event_ids, across partitions, says so. No test failed with the
// batch's insert into usage_events reading every event, not only those it
// claimed in event_ids: the event was billed twice.
func TestAnEventAgainInAnotherMonthIsStoredOnce(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	u := usage.Tokens{PromptTokens: 1000, CompletionTokens: 50}
	first := newEvent(c.ID, k.ID, "m", feb.Add(-time.Second), u)
	again := first
	again.Time = feb.Add(time.Second)
	if n, err := s.WriteEvents(ctx, []usage.Event{first}); err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v; want 1 new", n, err)
	}
	if n, err := s.WriteEvents(ctx, []usage.Event{again}); err != nil || n != 0 {
		t.Fatalf("the same id in the next month: WriteEvents = %d, %v; want 0 new", n, err)
	}
	// In one batch too, beside a new event.
	other := newEvent(c.ID, k.ID, "m", feb.Add(time.Hour), u)
	if n, err := s.WriteEvents(ctx, []usage.Event{other, again}); err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v; want 1 new", n, err)
	}
	page, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID, GroupBy: "month"})
	if err != nil {
		t.Fatal(err)
	}
	var requests, prompt int64
	for _, r := range page.Data {
		requests += r.Requests
		prompt += r.PromptTokens
	}
	if requests != 2 || prompt != 2000 {
		t.Fatalf("usage %+v: %d requests, %d prompt tokens; want 2 and 2000", page.Data, requests, prompt)
	}
}
