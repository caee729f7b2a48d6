package ledger

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/meter"
)

// Price is one version of a model's price, in integer micro-units of
// Currency: per million tokens for each token class, per request for the
// fee, per unit for server-tool units.
type Price struct {
	// ID is the price version: every rated event records it.
	ID       int64
	Model    string
	Currency string // ISO 4217 code, e.g. "USD"
	// InputMicros prices prompt tokens that are neither cache reads nor
	// cache writes; CachedInputMicros prices cache reads; CacheWriteMicros
	// cache writes; OutputMicros completion tokens.
	InputMicros       int64
	CachedInputMicros int64
	CacheWriteMicros  int64
	OutputMicros      int64
	// ReasoningMicros, when set, prices reasoning tokens apart from the
	// rest of the completion; nil prices them as output.
	ReasoningMicros *int64
	// RequestFeeMicros is charged once per request (micro-units).
	RequestFeeMicros int64
	// WebSearchMicros is charged per web search request (micro-units).
	WebSearchMicros int64
	// EffectiveFrom is when this version starts to apply; it applies until
	// EffectiveTo when set, else until a later version starts.
	EffectiveFrom time.Time
	EffectiveTo   *time.Time
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
func Rate(u meter.Usage, p Price) (int64, error) {
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

// ParseMicros converts a decimal amount, such as "2.50", into integer
// micro-units ("2.50" → 2500000). It returns an EInvalid error naming field
// for a malformed, negative or over-precise (more than six decimal places)
// value.
func ParseMicros(field, s string) (int64, error) {
	m, err := parseSignedMicros(field, s)
	if err == nil && m < 0 {
		return 0, errorf(EInvalid, "%s: %q is negative", field, s)
	}
	return m, err
}

// parseSignedMicros is ParseMicros allowing a sign.
func parseSignedMicros(field, s string) (int64, error) {
	d, err := decimal.NewFromString(strings.TrimSpace(s))
	if err != nil {
		return 0, errorf(EInvalid, "%s: %q is not a decimal number", field, s)
	}
	m := d.Shift(6)
	switch {
	case !m.IsInteger():
		return 0, errorf(EInvalid, "%s: %q has more than 6 decimal places", field, s)
	case m.Abs().GreaterThan(decimal.New(1<<62, 0)):
		return 0, errorf(EInvalid, "%s: %q is too large", field, s)
	}
	return m.IntPart(), nil
}

// FormatMicros formats integer micro-units as a decimal string ("2.5").
func FormatMicros(m int64) string { return decimal.New(m, -6).String() }

// FormatE12 formats an amount in 1e-12 units, given as a base-10 decimal
// string (so that sums beyond int64 and discounted charges stay exact), as
// a decimal string in currency units: "1500000000000" → "1.5".
func FormatE12(s string) (string, error) {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return "", fmt.Errorf("amount %q: %w", s, err)
	}
	return d.Shift(-12).String(), nil
}
