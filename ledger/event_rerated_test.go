package ledger_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEventSaysWhetherReRated: an event's unpriced, price_id, list_cost
// and charge are as first rated and its cost is what it is charged now;
// rerated says when a re-rating stands between them. An event stored with
// no price and priced since by a re-rating read "unpriced":true and
// "price_id":0 beside a cost of 2 USD, with nothing saying why.
func TestEventSaysWhetherReRated(t *testing.T) {
	b := newBilling(t, nil)
	at := jan.Add(3 * 24 * time.Hour)
	unpriced := b.event("m", at, usage.Tokens{PromptTokens: 1_000_000, CompletionTokens: 1_000_000})
	b.write(unpriced)
	b.price("other", "USD", "1", "1", "")
	priced := b.event("other", at, usage.Tokens{PromptTokens: 1_000_000})
	b.write(priced)
	for _, id := range []string{unpriced.ID, priced.ID} {
		e, err := b.s.Event(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Rerated {
			t.Errorf("event %s says rerated before any re-rating: %+v", id, e)
		}
	}
	b.price("m", "USD", "1", "1", "")
	if res, err := b.s.Rerate(b.ctx, jan, feb, nil); err != nil || res.Adjusted != 1 {
		t.Fatalf("rerate: %+v %v", res, err)
	}
	e, err := b.s.Event(b.ctx, unpriced.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Unpriced || e.PriceID != 0 || e.Charge != "0" || e.Cost != "2" || e.Currency != "USD" || !e.Rerated {
		t.Errorf("the event priced by re-rating = unpriced %v, price_id %d, charge %s, cost %s %s, rerated %v; want true, 0, 0, 2 USD, true",
			e.Unpriced, e.PriceID, e.Charge, e.Cost, e.Currency, e.Rerated)
	}
	if e, err := b.s.Event(b.ctx, priced.ID); err != nil || e.Rerated || e.Cost != "1" {
		t.Errorf("the event priced when stored, unchanged by the re-rating = %+v, %v; want rerated false, cost 1", e, err)
	}
}
