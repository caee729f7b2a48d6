package ledger

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Price is one version of a model's price (usage.Price: the gateways show
// callers their cost with the same rules).
type Price = usage.Price

// ParseMicros converts a decimal amount, such as "2.50", into integer
// micro-units ("2.50" → 2500000). It returns an EInvalid error naming field
// for a malformed, negative or over-precise (more than six decimal places)
// value, and for exponent notation ("1e6").
func ParseMicros(field, s string) (int64, error) {
	m, err := ParseSignedMicros(field, s)
	if err == nil && m < 0 {
		return 0, errorf(EInvalid, "%s: %q is negative", field, s)
	}
	return m, err
}

// ParseSignedMicros is ParseMicros allowing a sign (an adjustment's
// amount).
func ParseSignedMicros(field, s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, errorf(EInvalid, "%s: is required, a decimal string like \"10.50\"", field)
	}
	d, err := decimal.NewFromString(strings.TrimSpace(s))
	if err != nil {
		// Text with an "e" in it ("ten", "5 EUR") is no number either.
		return 0, errorf(EInvalid, "%s: %q is not a decimal number", field, s)
	}
	if strings.ContainsAny(s, "eE") {
		// decimal reads "1e6" as a million: a typo away from "16" or "1.6"
		// in an amount of money, so only plain notation is taken.
		if d.Exponent() > -40 && d.Exponent() < 40 {
			return 0, errorf(EInvalid, "%s: %q is in exponent notation; write the number out (%q)", field, s, d.String())
		}
		return 0, errorf(EInvalid, "%s: %q is in exponent notation; write the number out", field, s)
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
