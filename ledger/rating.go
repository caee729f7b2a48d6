package ledger

import (
	"strings"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// pricing is what rating needs: the price book by model and the
// overrides by customer, each sorted by effective_from.
type pricing struct {
	book      map[string][]Price
	overrides map[string][]usage.Override
}

// rate rates e by the rating rules (usage.RateEvent): an event with no
// price in force is unpriced, never dropped, never guessed; one whose cost
// cannot be computed is refused (the worker sets it aside).
func (p *pricing) rate(e *usage.Event) (usage.Rating, error) {
	// overrides are keyed by the customer id as Postgres writes it: in
	// lower case, as Normalize leaves it (ToLower copies nothing then).
	return usage.RateEvent(e, p.book[e.Model], p.overrides[strings.ToLower(e.CustomerID)])
}
