package usage_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRateEventChargesTheRequestFeeOnlyForWhatWasServed: a model's request
// fee is charged once per request, except to a failed event with no usage
// at all (its upstream refused, failed or was not reached: docs/billing.md,
// "nothing billed"). A request served with usage, or failed after the
// upstream counted some, pays it.
func TestRateEventChargesTheRequestFeeOnlyForWhatWasServed(t *testing.T) {
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prices := []usage.Price{{ID: 7, Model: "m", Currency: "USD", InputMicros: 1_000_000, RequestFeeMicros: 1_000, EffectiveFrom: jan}}
	const fee = 1_000 * 1_000_000 // 1,000 micro-units in 1e-12 units
	for _, tc := range []struct {
		name   string
		status usage.Status
		u      usage.Tokens
		want   int64
	}{
		{"served", usage.StatusOK, usage.Tokens{PromptTokens: 10}, 10*1_000_000 + fee},
		{"served, no tokens counted", usage.StatusOK, usage.Tokens{}, fee},
		{"no status (an old event)", "", usage.Tokens{}, fee},
		{"refused by its upstream", usage.StatusUpstreamError, usage.Tokens{}, 0},
		{"client gone before the answer", usage.StatusClientCancelled, usage.Tokens{}, 0},
		{"failed after the upstream counted some", usage.StatusUpstreamError, usage.Tokens{PromptTokens: 10}, 10*1_000_000 + fee},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := usage.Event{ID: "0197a3c2-1111-7222-8333-444455556666", Time: jan.Add(time.Hour), Model: "m", Status: tc.status, Usage: tc.u}
			r, err := usage.RateEvent(&e, prices, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.CostE12 != tc.want || r.Unpriced || r.PriceID == nil || *r.PriceID != 7 {
				t.Fatalf("rating %+v, want cost %d at price 7", r, tc.want)
			}
		})
	}
}

// TestRateRefusesASumBeyondInt64: each term of the cost fits an int64 but
// their sum does not. The cost is refused (the event set aside), never
// wrapped around to a negative charge, a credit to the customer.
func TestRateRefusesASumBeyondInt64(t *testing.T) {
	u := usage.Tokens{PromptTokens: 1 << 30, CompletionTokens: 1 << 30}
	p := usage.Price{InputMicros: 1 << 32, OutputMicros: 1 << 32} // 2^62 each: 2^63 in all
	if cost, err := usage.Rate(u, p); err == nil {
		t.Fatalf("Rate = %d, want an overflow error", cost)
	}
	p.OutputMicros-- // 2^63 − 2^30: the largest sums still fit
	if cost, err := usage.Rate(u, p); err != nil || cost != 1<<62+(1<<62-1<<30) {
		t.Fatalf("Rate = %d, %v; want %d", cost, err, int64(1<<62+(1<<62-1<<30)))
	}
}

// TestRateRefusesWebSearchesBeyondAnyRequest: a web search count so large
// that it times a million wraps around int64 (2^61 × 10^6 wraps to 0) is
// refused, not rated as if no search were made. Normalize clamps counts
// first on the meter's path; Rate itself must not rely on it.
func TestRateRefusesWebSearchesBeyondAnyRequest(t *testing.T) {
	p := usage.Price{WebSearchMicros: 10_000}
	if cost, err := usage.Rate(usage.Tokens{WebSearchRequests: 1 << 61}, p); err == nil {
		t.Fatalf("Rate of 2^61 web searches = %d, want an error", cost)
	}
	if cost, err := usage.Rate(usage.Tokens{WebSearchRequests: 3}, p); err != nil || cost != 3*10_000*1_000_000 {
		t.Fatalf("Rate of 3 web searches = %d, %v; want %d", cost, err, 3*10_000*1_000_000)
	}
}

// TestOverrideAtTakesTheLaterMadeOfTwoAlike: of two overrides for a model
// that start at the same time, the later made (the higher id) applies,
// whatever their order.
func TestOverrideAtTakesTheLaterMadeOfTwoAlike(t *testing.T) {
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := usage.Override{ID: 1, Model: "m", DiscountBP: 1000, EffectiveFrom: jan}
	b := usage.Override{ID: 2, Model: "m", DiscountBP: 2000, EffectiveFrom: jan}
	for _, os := range [][]usage.Override{{a, b}, {b, a}} {
		if o := usage.OverrideAt(os, "m", jan.Add(time.Hour)); o == nil || o.ID != 2 {
			t.Fatalf("OverrideAt(%+v) = %+v, want the override of id 2", os, o)
		}
	}
}
