package sse_test

import (
	"io"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/sse"
)

// TestUnendedSaysTheInputEndedTheEvent: Next returns an event the end of
// the input left without its blank line (the spec would drop it), and
// Unended says so, so that a relay can tell a frame the upstream cut off
// (`data: {"a":"tru`) from a whole one; an event ended by a blank line
// is not Unended, nor is the event before one that is.
func TestUnendedSaysTheInputEndedTheEvent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []bool
	}{
		{"data: a\n\ndata: {\"b\":\"tru", []bool{false, true}},
		{"data: a\n\ndata: b\n", []bool{false, true}},
		{"data: a\n\n", []bool{false}},
		{"data: a\r\n\r\ndata: b\r\n\r\n", []bool{false, false}},
	} {
		rd := sse.NewReader(strings.NewReader(tc.in))
		var got []bool
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Unended)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%q: %d events, want %d", tc.in, len(got), len(tc.want))
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: event %d Unended = %v, want %v", tc.in, i, got[i], tc.want[i])
			}
		}
	}
}
