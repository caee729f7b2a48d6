package gateway

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// TestTapStreamAnswerCountsWhatItCannotRead: an answer read as a stream
// whose event is past the SSE reader's bound (8 MiB) is counted by its
// bytes, as an unreadable answer is, not by what came before that event.
func TestTapStreamAnswerCountsWhatItCannotRead(t *testing.T) {
	body := `data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n" +
		"data: " + strings.Repeat("x", 9<<20) + "\n\n"
	var r tap.Report
	tapStreamAnswer([]byte(body), &r)
	if r.Output.Len() < 9<<20 {
		t.Fatalf("output %d bytes, want the body's %d counted", r.Output.Len(), len(body))
	}
}
