package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestADiscountDoesNotReplaceACustomPriceWithNothing: a customer with a
// custom price for a model the price book does not price, given a
// discount for that model, had the discount take over from its start
// (usage.OverrideAt: the later one), with no book price to discount: its
// requests were unpriced from then on, billed nothing (a money review).
// Such a discount is refused, naming the custom price; once the book
// prices the model it is taken, as is a discount for a model the book
// prices.
func TestADiscountDoesNotReplaceACustomPriceWithNothing(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "c", Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	custom := &ledger.PriceInput{Currency: "USD", Input: "1", Output: "2"}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "private-m", Price: custom, EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	discount := ledger.OverrideInput{Model: "private-m", DiscountPercent: "10", EffectiveFrom: jan.AddDate(0, 1, 0)}
	_, err = s.CreateOverride(ctx, c.ID, discount)
	if ledger.ErrorCode(err) != ledger.EInvalid || !strings.Contains(err.Error(), "custom price") {
		t.Fatalf("a discount replacing a custom price of a model the book does not price: %v; want invalid naming the custom price", err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "private-m", Currency: "USD", Input: "3", Output: "4", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, discount); err != nil {
		t.Fatalf("the same discount once the book prices the model: %v", err)
	}
}
