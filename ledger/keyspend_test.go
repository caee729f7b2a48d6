package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// keySpendAndRollups reads a key's spend of the current UTC day and month
// as key_spend keeps it (0 for a period the row is not on) and as its
// hourly rollups in its customer's currency add up, in micros.
func keySpendAndRollups(t *testing.T, s *ledger.Store, keyID string) (spend, rollups [2]int64) {
	t.Helper()
	ctx := context.Background()
	const periods = `(SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day,
	    date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month) d`
	for i, q := range []string{
		`SELECT coalesce((SELECT CASE WHEN sp.day_start = d.day THEN sp.day_e12 ELSE 0 END / 1000000 FROM key_spend sp WHERE sp.key_id = '%[1]s'), 0)::bigint FROM ` + periods,
		`SELECT coalesce((SELECT CASE WHEN sp.month_start = d.month THEN sp.month_e12 ELSE 0 END / 1000000 FROM key_spend sp WHERE sp.key_id = '%[1]s'), 0)::bigint FROM ` + periods,
		`SELECT (coalesce(sum(h.charge_e12) FILTER (WHERE h.hour >= d.day), 0) / 1000000)::bigint FROM ` + periods + `
		   CROSS JOIN api_keys k JOIN customers c ON c.id = k.customer_id
		   JOIN usage_hourly h ON h.customer_id = k.customer_id AND h.key_id = k.id AND h.currency = c.currency AND h.hour >= d.month
		 WHERE k.id = '%[1]s'`,
		`SELECT (coalesce(sum(h.charge_e12), 0) / 1000000)::bigint FROM ` + periods + `
		   CROSS JOIN api_keys k JOIN customers c ON c.id = k.customer_id
		   JOIN usage_hourly h ON h.customer_id = k.customer_id AND h.key_id = k.id AND h.currency = c.currency AND h.hour >= d.month
		 WHERE k.id = '%[1]s'`,
	} {
		v, err := s.QueryInt64ForTest(ctx, fmt.Sprintf(q, keyID))
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			spend[i] = v
		} else {
			rollups[i-2] = v
		}
	}
	return spend, rollups
}

// raceABatch writes events in a batch held open after its statement, runs
// other (a limit change, a re-rating) meanwhile until it finishes or waits
// for a lock, then lets the batch commit, and waits for both.
func raceABatch(t *testing.T, s *ledger.Store, events []usage.Event, other func() error) {
	t.Helper()
	ctx := context.Background()
	paused, release := make(chan struct{}), make(chan struct{})
	batch := make(chan error, 1)
	go func() {
		_, err := s.WriteEventsPausedForTest(ctx, events, func() {
			close(paused)
			<-release
		})
		batch <- err
	}()
	select {
	case <-paused:
	case err := <-batch:
		t.Fatalf("the batch ended before its pause: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- other() }()
	var otherErr error
	otherDone := false
wait:
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case otherErr = <-done:
			otherDone = true
			break wait
		default:
		}
		n, err := s.QueryInt64ForTest(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		if err != nil {
			t.Error(err)
			break
		}
		if n > 0 {
			break
		}
	}
	close(release)
	if err := <-batch; err != nil {
		t.Fatalf("the batch: %v", err)
	}
	if !otherDone {
		otherErr = <-done
	}
	if otherErr != nil {
		t.Fatal(otherErr)
	}
}

// TestKeySpendCountsABatchRacingALimitChange: a key's spend (key_spend) is
// what its rollups say after a limit change races a batch of its events.
// The change's recompute of the spend read the rollups from its own
// snapshot and overwrote key_spend: a batch that committed after that
// snapshot was lost from the spend, and the key could overspend its limit
// by it until the next recompute. Two ways (found by reading):
//   - the key had no limit: the batch, its snapshot from before the
//     change's commit, moved no spend, and the change's recompute did not
//     see its charges;
//   - the key had a limit: the recompute waited for the batch's lock on
//     the key's key_spend row, then wrote over the batch's increment.
//
// Here the batch is held open after its statement while the limit changes.
func TestKeySpendCountsABatchRacingALimitChange(t *testing.T) {
	for _, before := range []string{"", "100"} {
		name := "no limit before"
		if before != "" {
			name = "a limit before"
		}
		t.Run(name, func(t *testing.T) {
			s, c, _ := setup(t)
			ctx := context.Background()
			jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
				t.Fatal(err)
			}
			in := ledger.KeyInput{Name: "raced"}
			if before != "" {
				in.DailyLimit = &before
			}
			k, _, err := s.CreateKey(ctx, c.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			usd := usage.Tokens{PromptTokens: 1_000_000}
			now := time.Now().UTC()
			// A first event moves last_used_at, so that the raced batch
			// leaves the api_keys row alone (a row lock would order the two).
			if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", now, usd)}); err != nil {
				t.Fatal(err)
			}
			limit := "50"
			raceABatch(t, s, []usage.Event{newEvent(c.ID, k.ID, "m", now, usd), newEvent(c.ID, k.ID, "m", now, usd)}, func() error {
				_, err := s.UpdateKey(ctx, k.ID, ledger.KeyPatch{DailyLimit: ledger.Of(limit)})
				return err
			})
			spend, rollups := keySpendAndRollups(t, s, k.ID)
			if rollups != [2]int64{3_000_000, 3_000_000} || spend != rollups {
				t.Fatalf("key_spend (day, month) = %v micros, the rollups %v; want both 3 USD", spend, rollups)
			}
		})
	}
}

// TestKeySpendCountsABatchRacingARerate: a re-rating that moves a limited
// key's charges recomputes its spend; a batch of the key's events racing
// it keeps its charges in the spend. Re-rating an event in another
// currency than the customer's (none of the batch's balance rows in
// common) recomputed from a snapshot without the batch, waited for the
// batch's key_spend row lock, and wrote over the batch's increment.
func TestKeySpendCountsABatchRacingARerate(t *testing.T) {
	s, c, _ := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	limit := "100"
	k, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "raced", DailyLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	usd := usage.Tokens{PromptTokens: 1_000_000}
	now := time.Now().UTC()
	// An event of a model without a price (stored unpriced), and one that
	// moves last_used_at (see the test above).
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "u", now, usd), newEvent(c.ID, k.ID, "m", now, usd)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "u", Currency: "EUR", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	raceABatch(t, s, []usage.Event{newEvent(c.ID, k.ID, "m", now, usd), newEvent(c.ID, k.ID, "m", now, usd)}, func() error {
		res, err := s.Rerate(ctx, now.Add(-time.Hour), now.Add(time.Hour), nil)
		if err == nil && res.Priced != 1 {
			return fmt.Errorf("re-rating priced %d events; want 1", res.Priced)
		}
		return err
	})
	spend, rollups := keySpendAndRollups(t, s, k.ID)
	if rollups != [2]int64{3_000_000, 3_000_000} || spend != rollups {
		t.Fatalf("key_spend (day, month) = %v micros, the rollups %v; want both 3 USD", spend, rollups)
	}
}
