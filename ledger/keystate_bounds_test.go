package ledger_test

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStatesReadAtTheLargestAmounts: two credits of the largest amount the
// ledger takes (2^62 micro-units each) on a customer with a credit limit
// made its state's credit left (balance + credit limit, cast to bigint)
// overflow, so that reading it failed: the key syncer's pass failed with
// it, for every change of every customer after it, and a revoked key went
// on being served (an attacker's review, 2026-12-04). The credit left is
// now clamped to ±2^62 micro-units, and an entry that would carry a
// balance past that, away from zero, is refused; one towards zero is not.
func TestStatesReadAtTheLargestAmounts(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	const most = "4611686018427.387904" // 2^62 micro-units
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "vast", CreditLimit: new(most)})
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k", DailyLimit: new(most), MonthlyLimit: new(most)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: most, AllowSubMinor: true}); err != nil {
		t.Fatalf("a credit of the largest amount: %v", err)
	}
	_, cu, ok, err := s.KeyState(ctx, usage.KeyHash(secret))
	if err != nil || !ok {
		t.Fatalf("KeyState with 2^62 of credit and a 2^62 credit limit: %v, %v", ok, err)
	}
	if cu.CreditLeftMicros == nil || *cu.CreditLeftMicros != 1<<62 {
		t.Errorf("credit left = %v; want 2^62 micro-units (clamped)", ptr(cu.CreditLeftMicros))
	}
	_, err = s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "0.000001", AllowSubMinor: true})
	if ledger.ErrorCode(err) != ledger.EInvalid {
		t.Fatalf("a credit past the largest balance: %v; want %s", err, ledger.EInvalid)
	}
	b, err := s.Balance(ctx, c.ID)
	if err != nil || b.Balance != most {
		t.Fatalf("balance after the refused credit: %+v, %v; want %s (nothing of it recorded)", b, err, most)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindAdjustment, ledger.EntryInput{Amount: "-1"}); err != nil {
		t.Fatalf("an adjustment towards zero: %v", err)
	}
	// The other way: a debt past the largest amount is refused too.
	d, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "debt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, d.ID, ledger.KindAdjustment, ledger.EntryInput{Amount: "-" + most, AllowSubMinor: true}); err != nil {
		t.Fatal(err)
	}
	_, err = s.AddEntry(ctx, d.ID, ledger.KindAdjustment, ledger.EntryInput{Amount: "-" + most, AllowSubMinor: true})
	if ledger.ErrorCode(err) != ledger.EInvalid {
		t.Fatalf("an adjustment past the largest debt: %v; want %s", err, ledger.EInvalid)
	}
}
