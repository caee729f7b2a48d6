package ledger_test

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestUsageWithinHoursCountsTheRangeRerated: usage from or to a time
// within an hour counts the events of [from, to) alone, of the customer
// asked for alone, each at its cost after re-rating (its rerate entries
// found by its id), as the request log shows it: within one hour, across
// whole hours, and at either edge.
func TestUsageWithinHoursCountsTheRangeRerated(t *testing.T) {
	b := newBilling(t, nil)
	other := newBilling(t, b.s)
	day := jan.Add(9 * 24 * time.Hour)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	times := []time.Time{at(10, 5), at(10, 15), at(10, 45), at(11, 30), at(12, 10)}
	var events []usage.Event
	for i, tm := range times {
		events = append(events, b.event("m", tm, usage.Tokens{PromptTokens: int64(1000 * (i + 1)), CompletionTokens: 10}))
		other.write(other.event("m", tm, usage.Tokens{PromptTokens: 7}))
	}
	b.write(events...)
	b.price("m", "USD", "1", "2", "") // stored unpriced: a re-rating prices them
	if res, err := b.s.Rerate(b.ctx, jan, feb, nil); err != nil || res.Adjusted != 2*len(times) {
		t.Fatalf("rerate: %+v %v", res, err)
	}
	for _, r := range [][2]time.Time{
		{at(10, 10), at(10, 20)}, // within one hour
		{at(10, 10), at(12, 15)}, // both edges and a whole hour
		{at(10, 0), at(12, 15)},  // the end's edge
		{at(10, 10), at(12, 0)},  // the start's edge
		{at(10, 45), at(10, 45).Add(time.Microsecond)},
	} {
		var want ledger.UsageRow
		sum := decimal.Zero
		for _, e := range events {
			if e.Time.Before(r[0]) || !e.Time.Before(r[1]) {
				continue
			}
			ev, err := b.s.Event(b.ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			want.Requests++
			want.PromptTokens += e.Usage.PromptTokens
			sum = sum.Add(decimal.RequireFromString(ev.Cost))
		}
		page, err := b.s.Usage(b.ctx, ledger.UsageQuery{CustomerID: b.c.ID, From: r[0], To: r[1]})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].Requests != want.Requests || page.Data[0].PromptTokens != want.PromptTokens ||
			page.Data[0].UnpricedRequests != 0 || page.Data[0].Currency != "USD" || !decimal.RequireFromString(page.Data[0].Cost).Equal(sum) {
			t.Errorf("usage of [%s, %s) = %+v; want %d requests, %d prompt tokens, costing %s USD, none unpriced",
				r[0].Format(time.TimeOnly), r[1].Format(time.TimeOnly), page.Data, want.Requests, want.PromptTokens, sum)
		}
	}
}
