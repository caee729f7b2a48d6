package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEveryEventRecordsItsPriceVersion: "every event records the price
// version it was rated with" (DESIGN.md, invariant 4): the version in
// force at its time, and the customer's override when one applied; an
// unpriced event records none. The stored events' costs were checked,
// their versions were not.
func TestEveryEventRecordsItsPriceVersion(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v1, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "2", Output: "4", EffectiveFrom: jan.AddDate(0, 1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ov, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: jan.AddDate(0, 2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	u := usage.Tokens{PromptTokens: 10, CompletionTokens: 5}
	for _, tc := range []struct {
		model           string
		at              time.Time
		price, override int64
		unpriced        bool
	}{
		{"m", jan.Add(time.Hour), v1.ID, 0, false},
		{"m", jan.AddDate(0, 1, 1), v2.ID, 0, false},
		{"m", jan.AddDate(0, 2, 1), v2.ID, ov.ID, false},
		{"other", jan.Add(time.Hour), 0, 0, true},
	} {
		e := newEvent(c.ID, k.ID, tc.model, tc.at, u)
		if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Event(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.PriceID != tc.price || got.OverrideID != tc.override || got.Unpriced != tc.unpriced {
			t.Errorf("event of %s at %s: price %d, override %d, unpriced %v; want %d, %d, %v", tc.model, tc.at.Format(time.DateOnly),
				got.PriceID, got.OverrideID, got.Unpriced, tc.price, tc.override, tc.unpriced)
		}
	}
}
