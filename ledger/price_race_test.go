package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A version made in the past, then a re-rating of its period, leaves every
// event of the period at the new price (docs/pricing-and-budgets.md), the
// events the meter was writing while the version was made included. A
// batch that had read the price book before the version committed, and
// committed after the re-rating had read the period, kept the old price:
// the re-rating could not see it yet, and it was rated without the version.
// Here the batch is held open after its statement while the version is made
// and the period re-rated.
func TestABatchRacingABackdatedPriceIsReRated(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(s *ledger.Store, customerID string, from time.Time) error
		want   int64 // micro-USD
	}{
		{"a price version", func(s *ledger.Store, _ string, from time.Time) error {
			_, err := s.CreatePrice(context.Background(), ledger.PriceInput{Model: "m", Currency: "USD", Input: "10", Output: "10", EffectiveFrom: from})
			return err
		}, 10_000_000},
		{"a customer's discount", func(s *ledger.Store, customerID string, from time.Time) error {
			_, err := s.CreateOverride(context.Background(), customerID, ledger.OverrideInput{Model: "m", DiscountPercent: "50", EffectiveFrom: from})
			return err
		}, 500_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, cust, k := setup(t)
			ctx := context.Background()
			now := time.Now().UTC()
			if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
				EffectiveFrom: now.AddDate(0, -1, 0)}); err != nil {
				t.Fatal(err)
			}
			// 1,000,000 prompt tokens: 1 USD at the old price.
			ev := newEvent(cust.ID, k.ID, "m", now, usage.Tokens{PromptTokens: 1_000_000})
			raceABatch(t, s, []usage.Event{ev}, func() error {
				if err := c.change(s, cust.ID, now.Add(-time.Hour)); err != nil {
					return err
				}
				_, err := s.Rerate(ctx, now.Add(-2*time.Hour), now.Add(time.Hour), nil)
				return err
			})
			charge, err := s.QueryInt64ForTest(ctx, fmt.Sprintf(
				`SELECT (coalesce(sum(charge_e12), 0) / 1000000)::bigint FROM usage_hourly WHERE customer_id = '%s'`, cust.ID))
			if err != nil {
				t.Fatal(err)
			}
			if charge != c.want {
				t.Errorf("the event's charge after the re-rating: %d micro-USD, want %d (%s made from an hour before it)", charge, c.want, c.name)
			}
		})
	}
}

// TestAPriceChangeHoldsTheMeterBackBoundedly: a price version waits for the
// meter's batches in flight, and while it waits Postgres queues the
// meter's new batches behind it. Behind a batch held open (paused before
// its commit here; in life, one waiting for a row, or a re-rating's), the
// version gives up after its lock timeout (EUnavailable: try again), and
// the meter's other batches go on.
func TestAPriceChangeHoldsTheMeterBackBoundedly(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	c2, k2 := newCustomer(t, s)
	now := time.Now().UTC()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: now.AddDate(0, -1, 0)}); err != nil {
		t.Fatal(err)
	}
	usd := usage.Tokens{PromptTokens: 1_000_000}
	version := ledger.PriceInput{Model: "m", Currency: "USD", Input: "2", Output: "2", EffectiveFrom: now.Add(-time.Hour)}
	changeGivesUpBehindAHeldBatch(t, s, "the price version", newEvent(c.ID, k.ID, "m", now, usd), newEvent(c2.ID, k2.ID, "m", now, usd), func() error {
		_, err := s.CreatePrice(ctx, version)
		return err
	})
	if _, err := s.CreatePrice(ctx, version); err != nil {
		t.Fatalf("the price version tried again: %v", err)
	}
}
