package web

import (
	"math/big"
	"testing"
)

// TestAmountsShowEveryDecimal: a sum of amounts shows all its digits. With
// 12 decimals the portal's "Spend" card showed 0.000955647755 USD beside
// rows of 0.0009556477553321 (a discounted charge has up to 16 decimals),
// and a sum below 5e-13 showed as 0.
func TestAmountsShowEveryDecimal(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"0.0009556477553321"}, "0.0009556477553321 USD"},
		{[]string{"0.0000000000000001"}, "0.0000000000000001 USD"},
		{[]string{"0.0000000000004", "0.00000000000005"}, "0.00000000000045 USD"},
		{[]string{"1.50", "-0.5"}, "1 USD"},
		{[]string{"-0.0000000000000003"}, "-0.0000000000000003 USD"},
		{[]string{"1", "-1"}, "0 USD"},
	} {
		a := amounts{}
		for _, s := range c.in {
			a.add("USD", s)
		}
		if got := a.String(); got != c.want {
			t.Errorf("sum of %v = %q, want %q", c.in, got, c.want)
		}
	}
	// A rational with no finite decimal expansion is bounded and marked.
	if got := exact(big.NewRat(1, 3)); got != "≈0.333333333333333333" {
		t.Errorf("exact(1/3) = %q", got)
	}
	if got := exact(big.NewRat(-2, 3)); got != "≈-0.666666666666666667" {
		t.Errorf("exact(-2/3) = %q", got)
	}
}
