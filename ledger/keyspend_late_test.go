package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestKeySpendLeavesOutALateEventOfLastMonth: a key's spend (key_spend)
// is of the current UTC day and month; an event of an earlier month that
// reaches the ledger now (a spool drained after the month's end, or only
// a batch written in the first seconds of a month) lands in its own
// month's rollups and statement, never in this month's spend, which would
// eat into the key's monthly budget and could block it for usage it never
// had this month. Its spend stays what the current month's rollups say,
// in a batch of its own and in one with this month's events.
func TestKeySpendLeavesOutALateEventOfLastMonth(t *testing.T) {
	s, c, k := limitedKey(t, "100")
	ctx := context.Background()
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	late := func(tokens int64) usage.Event {
		return newEvent(c.ID, k.ID, "m", month.Add(-time.Hour), usage.Tokens{PromptTokens: tokens})
	}
	// 1 USD per million tokens: a token is a micro-unit.
	if n, err := s.WriteEvents(ctx, []usage.Event{late(5000)}); err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v; want 1 new", n, err)
	}
	wantSpend(t, s, k.ID, 0)
	if n, err := s.WriteEvents(ctx, []usage.Event{late(7000), newEvent(c.ID, k.ID, "m", now, usage.Tokens{PromptTokens: 1000})}); err != nil || n != 2 {
		t.Fatalf("WriteEvents = %d, %v; want 2 new", n, err)
	}
	wantSpend(t, s, k.ID, 1000)
}
