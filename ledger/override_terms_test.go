package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestACustomPriceChargesEveryTermItGives: an override's custom price is
// read back from the ledger with each of its terms, its reasoning price
// included (reasoning tokens are not charged at its output price), and a
// discount finer than two decimal places is refused, not truncated.
func TestACustomPriceChargesEveryTermItGives(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", EffectiveFrom: jan,
		Price: &ledger.PriceInput{Currency: "USD", Input: "2", CachedInput: "0.5", CacheWrite: "4", Output: "10", Reasoning: "30"}}); err != nil {
		t.Fatal(err)
	}
	// 600 uncached × 2 + 300 cached × 0.5 + 100 written × 4 + 150 output × 10
	// + 50 reasoning × 30 = 1200 + 150 + 400 + 1500 + 1500 = 4750 µ.
	e := newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 1000, CachedTokens: 300,
		CacheWriteTokens: 100, CompletionTokens: 200, ReasoningTokens: 50})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Event(ctx, e.ID); err != nil || got.Charge != "0.00475" {
		t.Errorf("charge at the custom price = %s, %v; want 0.00475", got.Charge, err)
	}
	_, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "12.345", EffectiveFrom: jan.AddDate(0, 1, 0)})
	if ledger.ErrorCode(err) != ledger.EInvalid {
		t.Errorf("a discount of 12.345%%: %v, want EInvalid", err)
	}
}
