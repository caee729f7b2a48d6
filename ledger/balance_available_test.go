package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAvailableIsTheBalanceAndTheCreditLimit: a postpaid customer may run
// its balance down to minus its credit limit, so what it has available is
// balance + credit_limit (the tests before had a limit of 0, where adding
// and subtracting it agree).
func TestAvailableIsTheBalanceAndTheCreditLimit(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	limit := "10"
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "postpaid", CreditLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: c.Currency, Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", time.Now(), usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Balance(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 5 − 0.002 charged = 4.998; with the limit of 10, 14.998 available.
	if b.Balance != "4.998" || b.Available == nil || *b.Available != "14.998" {
		t.Fatalf("balance %+v (available %v); want 4.998 and 14.998 available", b, b.Available)
	}
}
