package tap

import (
	"bytes"
	"encoding/json"
	"math"
)

// ParseCount reads a token count from raw, one JSON value, leniently: as
// Google's proto3 JSON mapping writes integers, and as some providers'
// encoders do. It accepts
//
//   - a JSON number whose value is a non-negative integer, however it is
//     written: 150, 150.0, 1.5e2, 15000e-2, -0;
//   - a string holding such a number ("150", "1.5e2"), which proto3 JSON
//     parsers must accept for integer fields (the string is the number
//     exactly: no surrounding whitespace).
//
// It reports false for anything else: another kind of value (null
// included: callers treat null as absent before asking), a number that is
// not integral (1.5), negative (-3), or beyond int64. A count that cannot
// be read is not a count of zero: callers must not take a report holding
// one as the provider's figures.
func ParseCount(raw []byte) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		raw = raw[1 : len(raw)-1]
		if bytes.IndexByte(raw, '\\') >= 0 { // escaped digits: rare enough for encoding/json
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
				return 0, false
			}
			raw = []byte(s)
		}
	}
	return integral(raw)
}

// Count is a token (or request) count of a provider's usage object, read
// by ParseCount when decoded with encoding/json: an integral number
// however written (150, 150.0, 1.5e2) or a string holding one. Any other
// value (a negative or fractional number, one beyond int64, another kind)
// is held as Unreadable. JSON null leaves it as it was: absent.
type Count int64

// Unreadable is a Count whose JSON value could not be read as a count.
const Unreadable Count = -1

// UnmarshalJSON reads b by ParseCount; it never fails.
func (c *Count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	*c = CountOf(b)
	return nil
}

// CountOf reads one count's JSON value, Unreadable when ParseCount cannot.
func CountOf(raw []byte) Count {
	if n, ok := ParseCount(raw); ok {
		return Count(n)
	}
	return Unreadable
}

// integral reads b, which must be exactly a JSON number, as a non-negative
// integer that fits an int64.
func integral(b []byte) (int64, bool) {
	i, neg := 0, false
	if i < len(b) && b[i] == '-' {
		i, neg = i+1, true
	}
	// The significant digits, integer part then fraction, and the power of
	// ten they are scaled by.
	start := i
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	intPart := b[start:i]
	var frac []byte
	if i < len(b) && b[i] == '.' {
		i++
		from := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == from {
			return 0, false
		}
		frac = b[from:i]
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		sign := 1
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			if b[i] == '-' {
				sign = -1
			}
			i++
		}
		from := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if exp < 1<<20 { // saturate: beyond any int64 either way
				exp = exp*10 + int(b[i]-'0')
			}
			i++
		}
		if i == from {
			return 0, false
		}
		exp *= sign
	}
	if i != len(b) {
		return 0, false
	}
	// value = digits × 10^scale, where digits are intPart and frac run
	// together, less their leading and trailing zeros.
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	lo, hi, scale := 0, len(intPart)+len(frac), exp-len(frac)
	for lo < hi && digit(lo) == '0' {
		lo++
	}
	for hi > lo && digit(hi-1) == '0' {
		hi, scale = hi-1, scale+1
	}
	switch {
	case lo == hi:
		return 0, true // zero, -0 included, whatever the exponent
	case neg, scale < 0, hi-lo+scale > 19:
		return 0, false // negative, not an integer, or too large
	}
	var n int64
	for k := lo; k < hi; k++ {
		d := int64(digit(k) - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	for range scale {
		if n > math.MaxInt64/10 {
			return 0, false
		}
		n *= 10
	}
	return n, true
}
