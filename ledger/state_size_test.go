package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestOverridesPastTheBoundCanBeReplaced: a customer whose overrides in
// force are already past ledger.MaxLiveTermsBytes (written before the
// bound, here by hand) may still replace one with new terms for the same
// model, which does not make them bigger; a new model's is refused.
func TestOverridesPastTheBoundCanBeReplaced(t *testing.T) {
	t.Parallel()
	store, url := ledgertest.NewStoreURL(t)
	ctx := context.Background()
	c, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	start := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	if _, err := conn.Exec(ctx, `INSERT INTO price_overrides (customer_id, model, discount_bp, effective_from)
		SELECT $1, repeat('<', 250) || lpad(i::text, 4, '0'), 500, $2 FROM generate_series(1, 300) i`, c.ID, start); err != nil {
		t.Fatal(err)
	}
	model := strings.Repeat("<", 250) + "0001"
	if _, err := store.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: model, DiscountPercent: "7",
		EffectiveFrom: start.Add(time.Hour)}); err != nil {
		t.Errorf("new terms for a model with terms, past the bound: %v; want them taken", err)
	}
	_, err = store.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "new", DiscountPercent: "7", EffectiveFrom: start})
	if le := (*ledger.Error)(nil); !errors.As(err, &le) || le.Code != ledger.EInvalid {
		t.Errorf("a new model's override past the bound: %v; want EInvalid", err)
	}
	// One for the past alone (to re-rate it) is taken.
	end := start.Add(time.Minute)
	if _, err := store.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "old", DiscountPercent: "7",
		EffectiveFrom: start, EffectiveTo: &end}); err != nil {
		t.Errorf("an override of the past alone, past the bound: %v; want it taken", err)
	}
}
