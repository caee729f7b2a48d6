package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestACustomerIsBlockedOnlyPastItsCreditLimit: a customer with a credit
// limit of 1 may owe up to 1: at a balance of −0.5 its keys still work,
// at −1.1 they are blocked. (The other tests block at a limit of 0, where
// the balance's bound is the same whatever the limit's sign.)
func TestACustomerIsBlockedOnlyPastItsCreditLimit(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "0",
		EffectiveFrom: now.AddDate(0, -1, 0)}); err != nil {
		t.Fatal(err)
	}
	limit := "1"
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "postpaid", Currency: "USD", CreditLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	// At 1 USD per 1M tokens a token is a micro-unit.
	for _, step := range []struct {
		tokens  int64
		blocked bool
		left    int64
	}{
		{500_000, false, 500_000}, // balance −0.5
		{600_000, true, -100_000}, // balance −1.1
	} {
		if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", now, usage.Tokens{PromptTokens: step.tokens})}); err != nil {
			t.Fatal(err)
		}
		_, cu, ok, err := s.KeyState(ctx, usage.KeyHash(secret))
		if err != nil || !ok {
			t.Fatalf("KeyState: %v, %v", ok, err)
		}
		if (cu.Blocked != "") != step.blocked || cu.CreditLeftMicros == nil || *cu.CreditLeftMicros != step.left {
			t.Fatalf("customer state %+v (left %v); want blocked %v, %d left", cu, ptr(cu.CreditLeftMicros), step.blocked, step.left)
		}
	}
}
