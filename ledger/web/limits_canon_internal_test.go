package web

import "testing"

// TestLimitValuesCompareByMeaning: a limits form field typed as shown but
// written otherwise ("10.50" for 10.5, an expiry to the minute for one
// shown to the second) is not a change, so it is not sent; one that is
// no value at all is left as typed, for the API to refuse.
func TestLimitValuesCompareByMeaning(t *testing.T) {
	for _, c := range []struct {
		canon   func(string) string
		in, out string
	}{
		{canonAmount, "10.50", "10.5"}, {canonAmount, " 010.500 ", "10.5"}, {canonAmount, ".5", "0.5"},
		{canonAmount, "5.", "5"}, {canonAmount, "0.0", "0"}, {canonAmount, "100", "100"}, {canonAmount, "", ""},
		{canonAmount, ".", "."}, {canonAmount, "1e3", "1e3"}, {canonAmount, "-5", "-5"}, {canonAmount, "1,000", "1,000"},
		{canonCount, "0120", "120"}, {canonCount, " 7 ", "7"}, {canonCount, "ten", "ten"}, {canonCount, "", ""},
		{canonExpiry, "2027-01-31", "2027-01-31T00:00:00"}, {canonExpiry, "2027-01-31T18:00", "2027-01-31T18:00:00"},
		{canonExpiry, "2027-01-31T20:00:00+02:00", "2027-01-31T18:00:00"}, {canonExpiry, "31/01/2027", "31/01/2027"},
	} {
		if got := c.canon(c.in); got != c.out {
			t.Errorf("%q reads as %q, want %q", c.in, got, c.out)
		}
	}
	if got := decimalPlaces("10.050"); got != 2 {
		t.Errorf("decimalPlaces(10.050) = %d, want 2", got)
	}
	for _, s := range []string{"10", "10.000", "1e-9", "abc", ""} {
		if got := decimalPlaces(s); got != 0 {
			t.Errorf("decimalPlaces(%q) = %d, want 0", s, got)
		}
	}
}
