package gateway

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Rater rates a request's event as the ledger will, with the price book
// and the customer's overrides as the gateway holds them
// (meter/keys.Cache); ok=false when it cannot.
type Rater interface {
	// Rate returns e's rating (price version, override, currency, list
	// cost in 1e-12 units of it, discount in basis points), or ok=false
	// when the gateway cannot rate it.
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
	return setUsageCost(obj, charge)
}

// billedUsage returns obj, a JSON answer, with every member encoding/json
// reads as its usage ("usage", "Usage", a repeat) replaced by one "usage"
// object holding the usage the event records (openai.AppendUsage): for
// an answer whose usage members decoders read differently
// (openai.Chunk.AmbiguousUsage), so that every client reads what was
// billed. It returns obj unchanged when it is not a JSON object.
func (x *exchange) billedUsage(obj []byte) []byte {
	return jsonscan.ReplaceMember(obj, "usage", openai.AppendUsage(nil, x.event.Usage))
}

// setUsageCost returns obj, a JSON object, with "cost": charge set in its
// "usage" object, in one copy; obj unchanged when it has no usage object
// or is not valid JSON. A repeated "usage" member (a hostile upstream's)
// is set in two copies, every one of them to the last's value with the
// cost, so that no reader of either finds another.
func setUsageCost(obj []byte, charge string) []byte {
	start, end, n, err := jsonscan.MemberSpan(obj, "usage")
	if err != nil || n == 0 || obj[start] != '{' {
		return obj
	}
	if n > 1 {
		u, err := jsonscan.SetMember(obj[start:end], "cost", []byte(charge))
		if err != nil {
			return obj
		}
		if out, err := jsonscan.SetMember(obj, "usage", u); err == nil {
			return out
		}
		return obj
	}
	// One copy: obj up to the usage object, the object with its cost, the rest.
	out := make([]byte, 0, len(obj)+len(charge)+len(`,"cost":`))
	out = append(out, obj[:start]...)
	out, err = jsonscan.AppendSetMember(out, obj[start:end], "cost", []byte(charge))
	if err != nil {
		return obj
	}
	return append(out, obj[end:]...)
}
