package usage

import (
	"fmt"
	"math/big"
	"math/bits"
	"strings"
	"time"
)

// Price is one version of a model's price, in integer micro-units of
// Currency: per million tokens for each token class, per request for the
// fee, per unit for server-tool units. The ledger rates events with it, and
// the gateways show callers what a request cost with the same rules.
type Price struct {
	// ID is the price version: every rated event records it.
	ID       int64  `json:"id"`
	Model    string `json:"model"`
	Currency string `json:"currency"` // ISO 4217 code, e.g. "USD"
	// InputMicros prices prompt tokens that are neither cache reads nor
	// cache writes; CachedInputMicros prices cache reads; CacheWriteMicros
	// cache writes; OutputMicros completion tokens.
	InputMicros       int64 `json:"input_micros"`
	CachedInputMicros int64 `json:"cached_input_micros"`
	CacheWriteMicros  int64 `json:"cache_write_micros"`
	OutputMicros      int64 `json:"output_micros"`
	// ReasoningMicros, when set, prices reasoning tokens apart from the
	// rest of the completion; nil prices them as output.
	ReasoningMicros *int64 `json:"reasoning_micros,omitempty"`
	// RequestFeeMicros is charged once per request (micro-units).
	RequestFeeMicros int64 `json:"request_fee_micros,omitempty"`
	// WebSearchMicros is charged per web search request (micro-units).
	WebSearchMicros int64 `json:"web_search_micros,omitempty"`
	// EffectiveFrom is when this version starts to apply; it applies until
	// EffectiveTo when set, else until a later version starts.
	EffectiveFrom time.Time  `json:"effective_from"`
	EffectiveTo   *time.Time `json:"effective_to,omitempty"`
}

// Rate returns the exact cost of u at price p, in 1e-12 units of p.Currency.
//
// A price of P micro-units per million tokens is P×1e-12 currency units per
// token, so n tokens cost n×P in 1e-12 units, with no rounding; a per-request
// or per-unit price of P micro-units costs P×1e6 per request or unit:
//
//	cost = (prompt − cached − cache_write) × input + cached × cached_input
//	     + cache_write × cache_write_price
//	     + (completion − reasoning) × output + reasoning × reasoning_price
//	     + request_fee × 1e6 + web_search_requests × web_search_price × 1e6
//
// Without a reasoning price, reasoning is output. Reasoning above the
// completion total (an upstream's quirk) is billed only up to it, and
// uncached input below zero as zero, never as a credit. Rate returns an
// error, and no cost, for negative inputs or a cost beyond int64 (about 9.2
// million currency units for one event).
func Rate(u Tokens, p Price) (int64, error) {
	if u.WebSearchRequests > 1<<40 {
		return 0, fmt.Errorf("rate: %d web search requests is beyond any real request", u.WebSearchRequests)
	}
	uncached := max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0)
	reasoning, reasoningPrice := int64(0), p.OutputMicros
	if p.ReasoningMicros != nil {
		reasoning, reasoningPrice = min(max(u.ReasoningTokens, 0), max(u.CompletionTokens, 0)), *p.ReasoningMicros
	}
	var sum uint64
	for _, term := range [...][2]int64{
		{uncached, p.InputMicros},
		{u.CachedTokens, p.CachedInputMicros},
		{u.CacheWriteTokens, p.CacheWriteMicros},
		{u.CompletionTokens - reasoning, p.OutputMicros},
		{reasoning, reasoningPrice},
		{1_000_000, p.RequestFeeMicros},
		{u.WebSearchRequests * 1_000_000, p.WebSearchMicros},
	} {
		if term[0] < 0 || term[1] < 0 {
			return 0, fmt.Errorf("rate: negative tokens or price")
		}
		hi, lo := bits.Mul64(uint64(term[0]), uint64(term[1]))
		var carry uint64
		sum, carry = bits.Add64(sum, lo, 0)
		if hi != 0 || carry != 0 || sum > 1<<63-1 {
			return 0, fmt.Errorf("rate: cost of %d units at %d micro-units overflows", term[0], term[1])
		}
	}
	return int64(sum), nil
}

// PriceAt returns the version of ps (one model's, sorted by EffectiveFrom)
// in force at t: a bounded version (a promotion) over the open-ended one.
func PriceAt(ps []Price, t time.Time) (Price, bool) {
	var open, bounded *Price
	for i := range ps {
		p := &ps[i]
		if p.EffectiveFrom.After(t) {
			break
		}
		if p.EffectiveTo == nil {
			open = p
		} else if t.Before(*p.EffectiveTo) {
			bounded = p
		}
	}
	switch {
	case bounded != nil:
		return *bounded, true
	case open != nil:
		return *open, true
	}
	return Price{}, false
}

// Override is a customer's own terms for a model ("" for every model):
// a custom price, or a discount on the price book's.
type Override struct {
	ID    int64  `json:"id"`
	Model string `json:"model"`
	// Custom is the custom price, nil for a discount.
	Custom *Price `json:"custom,omitempty"`
	// DiscountBP is the discount in basis points (0 to 10000).
	DiscountBP    int        `json:"discount_bp,omitempty"`
	EffectiveFrom time.Time  `json:"effective_from"`
	EffectiveTo   *time.Time `json:"effective_to,omitempty"`
}

// OverrideAt returns the override of os (one customer's, in any order)
// for model in force at t: a model-specific one over an all-models one;
// nil for none. Within each, overrides are dated as price versions are
// (see PriceAt): one without EffectiveTo applies until a later one
// without it starts, and one with EffectiveTo applies inside its window
// over them; of two that qualify alike, the later started (then the later
// made) applies.
func OverrideAt(os []Override, model string, t time.Time) *Override {
	// best[0] and best[1]: the model's bounded and open-ended; best[2]
	// and best[3]: the all-models ones.
	var best [4]*Override
	for i := range os {
		o := &os[i]
		if o.EffectiveFrom.After(t) || (o.EffectiveTo != nil && !t.Before(*o.EffectiveTo)) {
			continue
		}
		k := 0
		switch o.Model {
		case model:
		case "":
			k = 2
		default:
			continue
		}
		if o.EffectiveTo == nil {
			k++
		}
		if b := best[k]; b == nil || o.EffectiveFrom.After(b.EffectiveFrom) || (o.EffectiveFrom.Equal(b.EffectiveFrom) && o.ID > b.ID) {
			best[k] = o
		}
	}
	for _, o := range best {
		if o != nil {
			return o
		}
	}
	return nil
}

// Rating is how one event is rated.
type Rating struct {
	PriceID    *int64 // the price book's version in force, if any
	OverrideID *int64 // the customer's override used, if any
	Currency   string
	CostE12    int64 // at the price used, before discount (1e-12 units)
	DiscountBP int32
	Unpriced   bool
}

// RateEvent rates e at its time with its model's price versions (sorted
// by EffectiveFrom) and its customer's overrides. An event with no price
// in force, from the book or a custom override, is unpriced: cost 0,
// never guessed. A failed event with no usage at all (its upstream
// refused, failed or was not reached before answering) is charged no
// request fee either: it costs 0, as docs/billing.md says. It returns a
// RefusedError when the cost cannot be computed (see Rate): no retry can
// fix it.
func RateEvent(e *Event, prices []Price, overrides []Override) (Rating, error) {
	var r Rating
	base, hasBase := PriceAt(prices, e.Time)
	if hasBase {
		r.PriceID = &base.ID
	}
	ov := OverrideAt(overrides, e.Model, e.Time)
	price := base
	switch {
	case ov != nil && ov.Custom != nil:
		price, r.OverrideID = *ov.Custom, &ov.ID
	case !hasBase:
		r.Unpriced = true
		return r, nil
	case ov != nil:
		r.OverrideID, r.DiscountBP = &ov.ID, int32(ov.DiscountBP)
	}
	if e.Status != StatusOK && e.Status != "" && e.Usage == (Tokens{}) {
		price.RequestFeeMicros = 0
	}
	cost, err := Rate(e.Usage, price)
	if err != nil {
		return Rating{}, &RefusedError{ID: e.ID, Reason: err.Error()}
	}
	r.CostE12, r.Currency = cost, price.Currency
	return r, nil
}

// Charge is what the rating charges, after its discount, as an exact
// decimal in currency units ("0.0002625"): cost × (10000 − discount) /
// 10000, kept to 16 decimal places, which hold it exactly. It is "" for an
// unpriced rating.
func (r Rating) Charge() string {
	if r.Unpriced {
		return ""
	}
	n := new(big.Int).Mul(big.NewInt(r.CostE12), big.NewInt(int64(10000-r.DiscountBP)))
	return formatScaled(n, 16)
}

// formatScaled formats n × 10^−scale as a decimal without trailing zeros.
func formatScaled(n *big.Int, scale int) string {
	s := n.String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	whole, frac := s[:len(s)-scale], strings.TrimRight(s[len(s)-scale:], "0")
	if frac != "" {
		whole += "." + frac
	}
	if neg && whole != "0" {
		whole = "-" + whole
	}
	return whole
}
