package journal

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestParseIDTakesTheCanonicalFormOnly: request ids are journaled by the
// 16 bytes of their canonical text form, in either case; the other forms
// uuid.Parse accepts, and anything else, are not request ids of ours.
func TestParseIDTakesTheCanonicalFormOnly(t *testing.T) {
	const id = "0197a3c2-1111-7222-8333-00000000000a"
	want := uuid.MustParse(id)
	for _, s := range []string{id, strings.ToUpper(id)} {
		if got, ok := parseID(s); !ok || got != [16]byte(want) {
			t.Errorf("parseID(%q) = %x, %v; want %x", s, got, ok, want)
		}
	}
	for _, s := range []string{
		"urn:uuid:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", ""),
		"0197a3c2-1111-7222-8333-00000000000g", "0197a3c2-1111-7222-8333+00000000000a", "", "not-an-id",
	} {
		if got, ok := parseID(s); ok {
			t.Errorf("parseID(%q) = %x, true; want refused", s, got)
		}
	}
}
