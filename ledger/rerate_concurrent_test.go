package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateBesideTheMeterDoesNotDeadlock (an operators' load test): a
// re-rating of a period the meter was writing into wrote each event's
// rollup and balance in the events' time order, the meter its batch's in
// key order: each held a row the other waited for, and Postgres broke the
// deadlock by failing one, 163 times in 25 minutes; the re-rating
// answered 500 and the meter stalled up to 25 s. A re-rating batch now
// writes its rollups, then its balances, each in key order, as the
// meter's batch does (and retries a batch Postgres still picks as a
// deadlock's victim). Here, re-ratings of the hour run while batches of
// events keep coming into it, for the same customers, keys and models:
// none may fail, and the ledger reconciles.
func TestRerateBesideTheMeterDoesNotDeadlock(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	hour := time.Now().UTC().Truncate(time.Hour)
	if time.Since(hour) < 2*time.Minute {
		hour = hour.Add(-time.Hour) // a whole hour behind us, not the one that just began
	}
	models := []string{"m-a", "m-b", "m-c"}
	for _, m := range models {
		if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: m, Currency: "USD", Input: "1", Output: "2",
			EffectiveFrom: hour.AddDate(0, -1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	type who struct{ customer, key string }
	var keys []who
	for i := range 12 {
		c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: fmt.Sprintf("c%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			k, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: fmt.Sprintf("k%d", j)})
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, who{c.ID, k.ID})
		}
	}
	// lane picks the keys of one meter lane: the meter's lanes each write
	// their own customers' events (meter's lanes), so that they never wait
	// for each other; -1, every key.
	batch := func(n, seed, lane int) []usage.Event {
		ks := keys
		if lane >= 0 {
			ks = nil
			for i, k := range keys {
				if (i/2)%2 == lane { // two keys a customer
					ks = append(ks, k)
				}
			}
		}
		evs := make([]usage.Event, n)
		for i := range evs {
			w, m := ks[(i*7+seed)%len(ks)], models[(i+seed)%len(models)]
			evs[i] = newEvent(w.customer, w.key, m, hour.Add(time.Duration((i*131+seed)%3_600_000)*time.Millisecond),
				usage.Tokens{PromptTokens: 10, CompletionTokens: 5})
			evs[i].ID = uuid.NewString()
		}
		return evs
	}
	if _, err := s.WriteEvents(ctx, batch(3000, 0, -1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 2 { // two meter lanes, 30 batches of 200 each, each its customers'
		wg.Go(func() {
			for i := 1; i <= 30; i++ {
				if _, err := s.WriteEvents(ctx, batch(200, w*100000+i, w)); err != nil {
					errs <- fmt.Errorf("a meter batch beside the re-rating: %w", err)
					return
				}
			}
		})
	}
	for round := range 3 {
		// A new price version for every model, from the hour on: the
		// re-rating adjusts every event of it.
		for _, m := range models {
			if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: m, Currency: "USD", Input: fmt.Sprint(2 + round),
				Output: "3", EffectiveFrom: hour.Add(time.Duration(round) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Rerate(ctx, hour, hour.Add(time.Hour), nil); err != nil {
			errs <- fmt.Errorf("re-rating %d beside the meter: %w", round, err)
			break
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rec, err := s.Reconcile(context.Background(), hour, hour.Add(time.Hour))
	if err != nil || !rec.Clean {
		t.Fatalf("reconciliation after: %+v, %v", rec, err)
	}
}
