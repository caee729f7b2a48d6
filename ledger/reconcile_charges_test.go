package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestReconcileFindsChargesThatDrifted: a balance whose charges no longer
// equal the events' (a running total moved by hand, or by a write that
// missed it) is a mismatch, as one whose credits drifted is
// (TestReconcile tampers with the credits only).
func TestReconcileFindsChargesThatDrifted(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})}); err != nil {
		t.Fatal(err)
	}
	from, to := at.Truncate(24*time.Hour), at.Truncate(24*time.Hour).Add(24*time.Hour)
	if rec, err := s.Reconcile(ctx, from, to); err != nil || !rec.Clean {
		t.Fatalf("Reconcile = %+v, %v; want clean", rec, err)
	}
	if err := s.ExecForTest(ctx, `UPDATE customer_balances SET charges_e12 = charges_e12 + 1`); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Reconcile(ctx, from, to)
	if err != nil || rec.Clean || len(rec.BalanceMismatches) != 1 {
		t.Fatalf("after the charges drifted: Reconcile = %+v, %v; want one balance mismatch", rec, err)
	}
	m := rec.BalanceMismatches[0]
	stored, err := decimal.NewFromString(m.Stored.Charges)
	if err != nil {
		t.Fatal(err)
	}
	if m.CustomerID != c.ID || m.Expected.Charges != "0.002" || !stored.Sub(decimal.RequireFromString("0.002")).Equal(decimal.New(1, -12)) {
		t.Fatalf("mismatch %+v; want the charges expected 0.002, stored 1e-12 more", m)
	}
}
