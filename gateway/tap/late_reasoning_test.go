package tap_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLateOutputIsAddedToACountHoldingHiddenReasoning: output streamed
// after the final usage chunk of a reasoning model is added to its
// completion_tokens, which count the hidden reasoning too; compared with
// it, a count of all the visible output stayed below it, and the late
// text went free (a code review: 500 words after a report of 1,000
// completion tokens, 990 of them reasoning).
func TestLateOutputIsAddedToACountHoldingHiddenReasoning(t *testing.T) {
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	var r tap.Report
	var ct openai.ChatTap
	parse := func(s string) {
		c, err := openai.ParseChunk([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		ct.Chunk(c, &r)
	}
	parse(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`)
	parse(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	parse(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"completion_tokens_details":{"reasoning_tokens":990}}}`)
	late := strings.Repeat("word ", 500)
	parse(`{"choices":[{"index":0,"delta":{"content":"` + late + `"}}]}`)
	u, src := r.Resolve(est, tap.Text("hi"))
	lateTokens := est.Count(late)
	if u.CompletionTokens < 1000+lateTokens || src != usage.SourcePartial {
		t.Fatalf("billed %+v (%s) for %d late tokens relayed after a final report of 1000; want at least %d, partial",
			u, src, lateTokens, 1000+lateTokens)
	}
}
