package gateway

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Rater rates a request's event as the ledger will, with the price book
// and the customer's overrides as the gateway holds them
// (meter/keys.Cache); ok=false when it cannot.
type Rater interface {
	Rate(e *usage.Event) (usage.Rating, bool)
}

// The headers that carry a non-streamed response's cost: the charge after
// the customer's overrides and discounts, an exact decimal in Currency.
// (LiteLLM answers x-litellm-response-cost; OpenRouter puts usage.cost in
// the body, which Tollgate also does on the OpenAI routes.)
const (
	CostHeader     = "X-Tollgate-Cost"
	CurrencyHeader = "X-Tollgate-Currency"
)

// cost is what the committed event will be charged, and in what currency;
// "" when there is no Rater, the request is unpriced, or it cannot be
// rated here (the ledger's charge is the one billed either way).
func (x *exchange) cost() (charge, currency string) {
	if x.s.rates == nil || !x.committed {
		return "", ""
	}
	r, ok := x.s.rates.Rate(x.event)
	if !ok || r.Unpriced {
		return "", ""
	}
	return r.Charge(), r.Currency
}

// setCostHeaders sets the cost headers of a non-streamed response.
func (x *exchange) setCostHeaders(h http.Header) {
	if charge, currency := x.cost(); charge != "" {
		h.Set(CostHeader, charge)
		h.Set(CurrencyHeader, currency)
	}
}

// withCost returns an OpenAI body or chunk with "cost" set in its usage
// object, as OpenRouter's usage accounting does: an exact decimal JSON
// number in the customer's currency. It returns obj unchanged when there
// is no cost to show or no usage object.
func (x *exchange) withCost(obj []byte) []byte {
	charge, _ := x.cost()
	if charge == "" {
		return obj
	}
	u, ok, err := jsonscan.Member(obj, "usage")
	if err != nil || !ok || len(u) == 0 || u[0] != '{' {
		return obj
	}
	u, err = jsonscan.SetMember(u, "cost", []byte(charge))
	if err != nil {
		return obj
	}
	out, err := jsonscan.SetMember(obj, "usage", u)
	if err != nil {
		return obj
	}
	return out
}
