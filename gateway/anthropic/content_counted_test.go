package anthropic

import (
	"strings"
	"testing"
)

// An event whose text is spelled twice in one case-folding ("text" and
// "Text") is counted whole for the estimate: encoding/json reads the last
// (empty here), a client's SDK may read the other and show it.
func TestTextSpelledTwiceIsCounted(t *testing.T) {
	r := tapped(stream(`content_block_delta: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there","Text":""}}`))
	if !strings.Contains(r.Output.String(), "Hello there") {
		t.Errorf("output %q, want the text counted", r.Output.String())
	}
}
