package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestTermsApplyFromTheirStartAndNotAtTheirEnd pins the instants where
// terms change: a price version or an override is in force from its
// effective_from inclusive to its effective_to exclusive. Two promotions
// back to back ([d1, d7) and [d7, d9)) do not overlap; an event at exactly
// the last one's end is charged the open-ended price, not the
// promotion's, and one at exactly an override's start gets the override.
func TestTermsApplyFromTheirStartAndNotAtTheirEnd(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d1, d3, d7, d9 := jan.AddDate(0, 0, 1), jan.AddDate(0, 0, 3), jan.AddDate(0, 0, 7), jan.AddDate(0, 0, 9)
	price := func(input string, from time.Time, to *time.Time) ledger.Price {
		t.Helper()
		p, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: input, Output: "0",
			EffectiveFrom: from, EffectiveTo: to})
		if err != nil {
			t.Fatalf("price from %s: %v", from.Format(time.DateOnly), err)
		}
		return p
	}
	list, promo1, promo2 := price("10", jan, nil), price("1", d1, &d7), price("2", d7, &d9)
	ov, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: d3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		at              time.Time
		price, override int64
		charge          string // 1000 prompt tokens
	}{
		{"the first promotion's start", d1, promo1.ID, 0, "0.001"},
		{"the discount's start", d3, promo1.ID, ov.ID, "0.0009"},
		{"the first promotion's end", d7, promo2.ID, ov.ID, "0.0018"},
		{"just before the last promotion's end", d9.Add(-time.Microsecond), promo2.ID, ov.ID, "0.0018"},
		{"the last promotion's end", d9, list.ID, ov.ID, "0.009"},
	} {
		e := newEvent(c.ID, k.ID, "m", tc.at, usage.Tokens{PromptTokens: 1000})
		if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Event(ctx, e.ID)
		if err != nil || got.PriceID != tc.price || got.OverrideID != tc.override || got.Charge != tc.charge {
			t.Errorf("event at %s: price %d, override %d, charge %s, %v; want %d, %d, %s", tc.name,
				got.PriceID, got.OverrideID, got.Charge, err, tc.price, tc.override, tc.charge)
		}
	}
}

// TestASeedPriceDiffersInAnyTerm: EnsurePrice (seed prices from the
// config) returns the version in the ledger only when every term is the
// same; a seed that changes any one term, cache reads and writes,
// reasoning, fees or the end of its window included, is EConflict, never
// silently kept at the old terms.
func TestASeedPriceDiffersInAnyTerm(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := jan.AddDate(0, 1, 0)
	seed := ledger.PriceInput{Model: "m", Currency: "USD", Input: "3", CachedInput: "0.3", CacheWrite: "3.75", Output: "15",
		Reasoning: "20", RequestFee: "0.001", WebSearch: "0.01", EffectiveFrom: jan, EffectiveTo: &end}
	if _, err := s.EnsurePrice(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsurePrice(ctx, seed); err != nil {
		t.Fatalf("the same seed again: %v", err)
	}
	later := end.AddDate(0, 0, 1)
	for name, change := range map[string]func(*ledger.PriceInput){
		"input":        func(p *ledger.PriceInput) { p.Input = "4" },
		"cached_input": func(p *ledger.PriceInput) { p.CachedInput = "0.4" },
		"cache_write":  func(p *ledger.PriceInput) { p.CacheWrite = "4" },
		"output":       func(p *ledger.PriceInput) { p.Output = "16" },
		"reasoning":    func(p *ledger.PriceInput) { p.Reasoning = "" },
		"request_fee":  func(p *ledger.PriceInput) { p.RequestFee = "0.002" },
		"web_search":   func(p *ledger.PriceInput) { p.WebSearch = "0.02" },
		"currency":     func(p *ledger.PriceInput) { p.Currency = "EUR" },
		"effective_to": func(p *ledger.PriceInput) { p.EffectiveTo = &later },
	} {
		in := seed
		change(&in)
		if _, err := s.EnsurePrice(ctx, in); ledger.ErrorCode(err) != ledger.EConflict {
			t.Errorf("a seed with another %s: %v, want EConflict", name, err)
		}
	}
}
