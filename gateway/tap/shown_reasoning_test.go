package tap_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestShownReasoningIsCountedAsReasoningInAnEstimate: a stream cut short
// after its model showed reasoning as text (chat reasoning_content or
// reasoning deltas, as DeepSeek, OpenRouter and vLLM send; Anthropic's
// thinking; Gemini's thought parts; the Responses API's reasoning_text)
// was estimated with all of that text as completion tokens and
// reasoning_tokens 0, so a model's reasoning price never applied to it.
// The reasoning shown is counted as reasoning_tokens, within
// completion_tokens (DESIGN: completion counts all output including
// reasoning; reasoning is a subset).
func TestShownReasoningIsCountedAsReasoningInAnEstimate(t *testing.T) {
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	thought := strings.Repeat("let me think about it ", 20)
	answer := "The answer is 42."
	wantReasoning, wantOutput := est.Count(thought), est.Count(thought+answer)

	var ct openai.ChatTap
	chunk := func(r *tap.Report, s string) {
		c, err := openai.ParseChunk([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		ct.Chunk(c, r)
	}
	scan := func(r *tap.Report, s string) {
		var sc openai.ChunkScan
		if !openai.ScanChunk([]byte(s), &sc) {
			t.Fatalf("not scanned: %s", s)
		}
		ct.Scanned(&sc, r)
	}
	for _, field := range []string{"reasoning_content", "reasoning"} {
		for name, feed := range map[string]func(*tap.Report, string){"parsed": chunk, "scanned": scan} {
			var r tap.Report
			feed(&r, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"`+field+`":"`+thought+`"},"finish_reason":null}]}`)
			feed(&r, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+answer+`"},"finish_reason":null}]}`)
			u, src := r.Resolve(est, tap.Text("hi"))
			if src != usage.SourceEstimated || u.ReasoningTokens != wantReasoning || u.CompletionTokens != wantOutput {
				t.Errorf("%s %s cut short: %+v (%s); want estimated, %d reasoning tokens within %d completion tokens",
					name, field, u, src, wantReasoning, wantOutput)
			}
		}
	}

	var r tap.Report
	r.AddReasoning(thought)
	u, _ := r.Resolve(est, tap.Text("hi"))
	if u.ReasoningTokens != wantReasoning || u.CompletionTokens != wantReasoning {
		t.Errorf("only reasoning before the cut: %+v; want %d reasoning tokens, all the completion", u, wantReasoning)
	}

	// A report so far that counted less than was shown (Anthropic's
	// message_start: output_tokens 1): the completion is raised to the
	// tokenizer's count, and the reasoning with it.
	r = tap.Report{}
	r.SetUsage(usage.Tokens{PromptTokens: 17, CompletionTokens: 1})
	r.AddReasoning(thought)
	r.AddOutput(answer)
	u, src := r.Resolve(est, tap.Text("hi"))
	if src != usage.SourcePartial || u.CompletionTokens != wantOutput || u.ReasoningTokens != wantReasoning {
		t.Errorf("a report so far, then reasoning shown: %+v (%s); want partial, %d reasoning tokens within %d", u, src, wantReasoning, wantOutput)
	}
}

// TestShownReasoningNeverExceedsTheCompletion: reasoning shown in pieces
// between which content came counts, joined, more tokens than all the
// output does ("i", "gredients" around "n": 3 tokens, where "ingredients"
// is 1), and an estimate bills it at most the completion: reasoning is a
// subset of the completion.
func TestShownReasoningNeverExceedsTheCompletion(t *testing.T) {
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	var r tap.Report
	r.AddReasoning("i")
	r.AddOutput("n")
	r.AddReasoning("gredients")
	if est.Count(r.Reasoning.String()) <= est.Count(r.Output.String()) {
		t.Fatalf("the tokenizer counts %q no more than %q: the case shows nothing", r.Reasoning.String(), r.Output.String())
	}
	if u, src := r.Resolve(est, tap.Text("")); u.ReasoningTokens > u.CompletionTokens || u.ReasoningTokens == 0 || src != usage.SourceEstimated {
		t.Fatalf("estimated %+v (%s): want reasoning within the completion, not zero", u, src)
	}
}
