package tap

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

var countCases = []struct {
	raw  string
	n    int64
	read bool
}{
	{`150`, 150, true}, {`0`, 0, true}, {`-0`, 0, true}, {`150.0`, 150, true}, {`1.5e2`, 150, true},
	{`1.5E+2`, 150, true}, {`15000e-2`, 150, true}, {`0.0e-5`, 0, true}, {`0e999999999999`, 0, true},
	{`"11"`, 11, true}, {`"1.5e2"`, 150, true}, {`"\u0031\u0031"`, 11, true}, {`"-0"`, 0, true},
	{`9223372036854775807`, 9223372036854775807, true}, {`9.223372036854775807e18`, 9223372036854775807, true},
	{` 7 `, 7, true},
	{`9223372036854775808`, 0, false}, {`1e19`, 0, false}, {`1e999999999999`, 0, false}, {`1.5`, 0, false},
	{`1e-1`, 0, false}, {`-1`, 0, false}, {`-1.0e2`, 0, false}, {`"-3"`, 0, false}, {`"abc"`, 0, false},
	{`""`, 0, false}, {`" 11"`, 0, false}, {`"11 "`, 0, false}, {`null`, 0, false}, {`true`, 0, false},
	{`{}`, 0, false}, {`[1]`, 0, false}, {`01`, 0, false}, {`1.`, 0, false}, {`.5`, 0, false}, {`1e`, 0, false},
	{`+1`, 0, false}, {`0x10`, 0, false}, {`"0x10"`, 0, false}, {`"1`, 0, false}, {``, 0, false},
}

func TestParseCount(t *testing.T) {
	for _, c := range countCases {
		n, ok := ParseCount([]byte(c.raw))
		if n != c.n || ok != c.read {
			t.Errorf("ParseCount(%s) = %d, %v; want %d, %v", c.raw, n, ok, c.n, c.read)
		}
	}
}

// FuzzParseCount checks ParseCount against exact rational arithmetic: it
// reads a value exactly when the value is a JSON number (or a string
// holding one) that is a non-negative integer within int64.
func FuzzParseCount(f *testing.F) {
	for _, c := range countCases {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, ok := ParseCount([]byte(raw))
		want, wantOK := refCount(raw)
		if n != want || ok != wantOK {
			t.Fatalf("ParseCount(%q) = %d, %v; want %d, %v", raw, n, ok, want, wantOK)
		}
	})
}

// refCount is ParseCount by way of encoding/json and math/big.
func refCount(raw string) (int64, bool) {
	v := strings.TrimSpace(raw)
	if strings.HasPrefix(v, `"`) {
		var s string
		if json.Unmarshal([]byte(v), &s) != nil {
			return 0, false
		}
		v = s
	}
	// v must be exactly one JSON number.
	if v == "" || v[0] != '-' && (v[0] < '0' || v[0] > '9') || strings.TrimSpace(v) != v || !json.Valid([]byte(v)) {
		return 0, false
	}
	mant, exp := v, int64(0)
	if i := strings.IndexAny(v, "eE"); i >= 0 {
		mant = v[:i]
		e, err := strconv.ParseInt(strings.TrimPrefix(v[i+1:], "+"), 10, 64)
		if err != nil || e > 1e6 || e < -1e6 { // beyond what big.Rat should be asked
			if strings.Trim(mant, "-0.") == "" {
				return 0, true // zero
			}
			if len(v) > 1e5 {
				panic("input too long for this reference")
			}
			return 0, false // too large, or not an integer
		}
		exp = e
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		return 0, false
	}
	pow := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(max(exp, -exp)), nil))
	if exp >= 0 {
		r.Mul(r, pow)
	} else {
		r.Quo(r, pow)
	}
	if !r.IsInt() || r.Sign() < 0 || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}
