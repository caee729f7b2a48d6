package ledger

import (
	"github.com/tollgate-dev/tollgate/meter"
)

// rating is how one event was rated.
type rating struct {
	priceID    *int64 // the price book's version in force, if any
	overrideID *int64 // the customer's override used, if any
	currency   string
	costE12    int64 // at the price used, before discount
	discountBP int32
	unpriced   bool
}

// pricing is what rating needs: the price book by model and the
// overrides by customer, each sorted by effective_from.
type pricing struct {
	book      map[string][]Price
	overrides map[string][]Override
}

// rate rates e. An event with no price in force, from the book or a custom
// override, is unpriced: cost 0, never dropped, never guessed.
func (p *pricing) rate(e *meter.Event) (rating, error) {
	var r rating
	base, hasBase := priceAt(p.book[e.Model], e.Time)
	if hasBase {
		r.priceID = &base.ID
	}
	ov := overrideAt(p.overrides[e.CustomerID], e.Model, e.Time)
	price := base
	switch {
	case ov != nil && ov.Custom != nil:
		price, r.overrideID = *ov.Custom, &ov.ID
	case !hasBase:
		r.unpriced = true
		return r, nil
	case ov != nil:
		r.overrideID, r.discountBP = &ov.ID, int32(ov.DiscountBP)
	}
	cost, err := Rate(e.Usage, price)
	if err != nil {
		// No retry can fix it: the worker sets the event aside.
		return rating{}, &meter.EventError{ID: e.ID, Reason: err.Error()}
	}
	r.costE12, r.currency = cost, price.Currency
	return r, nil
}
