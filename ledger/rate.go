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
// Currency per million tokens, for each token class.
type Price struct {
	// ID is the price version: every rated event records it.
	ID       int64
	Model    string
	Currency string // ISO 4217 code, e.g. "USD"
	// InputMicros prices prompt tokens that are neither cache reads nor
	// cache writes; CachedInputMicros prices cache reads; CacheWriteMicros
	// prices cache writes; OutputMicros prices completion tokens, reasoning
	// included.
	InputMicros       int64
	CachedInputMicros int64
	CacheWriteMicros  int64
	OutputMicros      int64
	// EffectiveFrom is when this version starts to apply. It applies until the
	// next version's EffectiveFrom.
	EffectiveFrom time.Time
}

// Rate returns the exact cost of u at price p, in 1e-12 units of p.Currency.
//
// A price of P micro-units per million tokens is P×1e-12 currency units per
// token, so the cost of n tokens is n×P in 1e-12 units, with no rounding:
//
//	cost = (prompt − cached − cache_write) × input
//	     + cached × cached_input + cache_write × cache_write_price
//	     + completion × output
//
// Uncached input below zero (an upstream reporting cache subsets larger than
// its prompt total) is billed as zero rather than as a credit. Rate returns
// an error, and no cost, when the cost does not fit in an int64 (above about
// 9.2 million currency units for one event).
func Rate(u meter.Usage, p Price) (int64, error) {
	uncached := u.PromptTokens - u.CachedTokens - u.CacheWriteTokens
	if uncached < 0 {
		uncached = 0
	}
	var sum uint64
	for _, term := range [...][2]int64{
		{uncached, p.InputMicros},
		{u.CachedTokens, p.CachedInputMicros},
		{u.CacheWriteTokens, p.CacheWriteMicros},
		{u.CompletionTokens, p.OutputMicros},
	} {
		if term[0] < 0 || term[1] < 0 {
			return 0, fmt.Errorf("rate: negative tokens or price")
		}
		hi, lo := bits.Mul64(uint64(term[0]), uint64(term[1]))
		var carry uint64
		sum, carry = bits.Add64(sum, lo, 0)
		if hi != 0 || carry != 0 || sum > 1<<63-1 {
			return 0, fmt.Errorf("rate: cost of %d tokens at %d micro-units overflows", term[0], term[1])
		}
	}
	return int64(sum), nil
}

// ParseMicros converts a decimal price per million tokens, such as "2.50",
// into integer micro-units ("2.50" → 2500000). It returns an EInvalid error
// naming field for a malformed, negative or over-precise (more than six
// decimal places) value.
func ParseMicros(field, s string) (int64, error) {
	d, err := decimal.NewFromString(strings.TrimSpace(s))
	if err != nil {
		return 0, errorf(EInvalid, "%s: %q is not a decimal number", field, s)
	}
	m := d.Shift(6)
	switch {
	case d.IsNegative():
		return 0, errorf(EInvalid, "%s: %q is negative", field, s)
	case !m.IsInteger():
		return 0, errorf(EInvalid, "%s: %q has more than 6 decimal places", field, s)
	case m.GreaterThan(decimal.New(1<<62, 0)):
		return 0, errorf(EInvalid, "%s: %q is too large", field, s)
	}
	return m.IntPart(), nil
}

// FormatMicros formats integer micro-units as a decimal string ("2.5").
func FormatMicros(m int64) string { return decimal.New(m, -6).String() }

// FormatE12 formats a cost in 1e-12 units, given as a base-10 integer string
// (so that sums beyond int64 stay exact), as a decimal string in currency
// units: "1500000000000" → "1.5".
func FormatE12(s string) (string, error) {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return "", fmt.Errorf("cost %q: %w", s, err)
	}
	return d.Shift(-12).String(), nil
}
