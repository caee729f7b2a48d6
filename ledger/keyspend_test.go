package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
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

// limitedKey makes a fresh ledger with model "m" priced 1 USD per million
// tokens and a key of customer "acme" with daily limit dailyLimit in USD
// ("" for none), and waits past a UTC midnight that is near
// (awayFromMidnight).
func limitedKey(t *testing.T, dailyLimit string) (*ledger.Store, ledger.Customer, ledger.Key) {
	t.Helper()
	s, c, _ := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	in := ledger.KeyInput{Name: "limited"}
	if dailyLimit != "" {
		in.DailyLimit = &dailyLimit
	}
	k, _, err := s.CreateKey(ctx, c.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	ledgertest.AwayFromMidnight(t)
	return s, c, k
}

// wantSpend fails t unless key keyID's spend (key_spend) and its rollups
// both hold micros for the current UTC day and month.
func wantSpend(t *testing.T, s *ledger.Store, keyID string, micros int64) {
	t.Helper()
	spend, rollups := keySpendAndRollups(t, s, keyID)
	if want := [2]int64{micros, micros}; rollups != want || spend != rollups {
		t.Fatalf("key_spend (day, month) = %v micros, the rollups %v; want both %d", spend, rollups, micros)
	}
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
			s, c, k := limitedKey(t, before)
			ctx := context.Background()
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
			wantSpend(t, s, k.ID, 3_000_000)
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
	s, c, k := limitedKey(t, "100")
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
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
	wantSpend(t, s, k.ID, 3_000_000)
}

// TestALimitChangeHoldsTheMeterBackBoundedly: a limit change waits for
// the key spend lock, and while it waits Postgres queues every new meter
// batch behind it, whatever its keys. A batch held open (here, paused
// before its commit; in life, one waiting for a row, or a re-rating's)
// made the change wait with no bound, and the whole meter with it. The
// change now gives up after its lock timeout (EUnavailable: try again)
// while the batch is still open, and the meter's other batches go on.
func TestALimitChangeHoldsTheMeterBackBoundedly(t *testing.T) {
	s, c, k := limitedKey(t, "100")
	ctx := context.Background()
	c2, k2 := newCustomer(t, s) // another customer's key: its batch shares no row with the paused one
	usd := usage.Tokens{PromptTokens: 1_000_000}
	now := time.Now().UTC()
	changeGivesUpBehindAHeldBatch(t, s, "the limit change", newEvent(c.ID, k.ID, "m", now, usd), newEvent(c2.ID, k2.ID, "m", now, usd), func() error {
		_, err := s.UpdateKey(ctx, k.ID, ledger.KeyPatch{DailyLimit: ledger.Of("50")})
		return err
	})
	// Tried again, the change goes through, and counts the batch.
	if _, err := s.UpdateKey(ctx, k.ID, ledger.KeyPatch{DailyLimit: ledger.Of("50")}); err != nil {
		t.Fatal(err)
	}
	wantSpend(t, s, k.ID, 1_000_000)
}

// changeGivesUpBehindAHeldBatch holds a meter batch of held open before its
// commit, runs change (named what) beside it, and checks that change gives
// up with EUnavailable after its lock timeout while the batch is still
// open, and that a batch of other (another customer's event) is written
// meanwhile, not queued behind change's wait; then it lets the held batch
// commit.
func changeGivesUpBehindAHeldBatch(t *testing.T, s *ledger.Store, what string, held, other usage.Event, change func() error) {
	t.Helper()
	ctx := context.Background()
	paused, release := make(chan struct{}), make(chan struct{})
	heldDone := make(chan error, 1)
	go func() {
		_, err := s.WriteEventsPausedForTest(ctx, []usage.Event{held}, func() {
			close(paused)
			<-release
		})
		heldDone <- err
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	<-paused
	changed := make(chan error, 1)
	go func() { changed <- change() }()
	waitForALockWait(t, s)
	otherDone := make(chan error, 1)
	go func() {
		_, err := s.WriteEvents(ctx, []usage.Event{other})
		otherDone <- err
	}()
	// Both end while the paused batch is still open.
	select {
	case err := <-changed:
		if ledger.ErrorCode(err) != ledger.EUnavailable {
			t.Fatalf("%s behind a batch held open: %v; want EUnavailable", what, err)
		}
		t.Logf("%s gave up: %v", what, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waits for a batch held open 30 s", what)
	}
	select {
	case err := <-otherDone:
		if err != nil {
			t.Fatalf("another customer's batch: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("another customer's batch still waits behind %s after 30 s", what)
	}
	close(release)
	released = true
	if err := <-heldDone; err != nil {
		t.Fatalf("the held batch: %v", err)
	}
}

// waitForALockWait waits until a session of s's database waits for a lock.
func waitForALockWait(t *testing.T, s *ledger.Store) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		n, err := s.QueryInt64ForTest(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no session waits for a lock after 30 s")
}
