package anthropic

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// An event whose text is spelled twice in one case-folding ("text" and
// "Text") is counted whole for the estimate: encoding/json reads the last
// (empty here), a client's SDK may read the other and show it.
func TestTextSpelledTwiceIsCounted(t *testing.T) {
	events := stream(`content_block_delta: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there","Text":""}}`)
	var tp Tap
	var r tap.Report
	tp.Event(&events[0], &r)
	if !strings.Contains(r.Output.String(), "Hello there") {
		t.Errorf("output %q, want the text counted", r.Output.String())
	}
}
