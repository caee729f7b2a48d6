package ledger

import (
	"strings"
	"testing"
)

// TestParseMicrosWordsWithAnE: an amount that is no number is said to be
// no number, whatever its letters. Any text with an "e" in it ("ten",
// "5 EUR", "free") was said to be "in exponent notation; write the number
// out ("1000000")", a million the operator never typed; exponent notation
// that is a number is still refused as such.
func TestParseMicrosWordsWithAnE(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"ten", `amount: "ten" is not a decimal number`},
		{"5 EUR", `amount: "5 EUR" is not a decimal number`},
		{"free", `amount: "free" is not a decimal number`},
		{"e", `amount: "e" is not a decimal number`},
		{"1e3", `amount: "1e3" is in exponent notation; write the number out ("1000")`},
		{"2.5E-2", `amount: "2.5E-2" is in exponent notation; write the number out ("0.025")`},
	} {
		_, err := ParseMicros("amount", tc.in)
		if err == nil || ErrorCode(err) != EInvalid || err.Error() != tc.says {
			t.Errorf("ParseMicros(%q) = %v; want EInvalid %q", tc.in, err, tc.says)
		}
	}
	if _, err := ParseSignedMicros("amount", "minus ten"); err == nil || !strings.Contains(err.Error(), "is not a decimal number") {
		t.Errorf(`ParseSignedMicros("minus ten") = %v; want "is not a decimal number"`, err)
	}
}
