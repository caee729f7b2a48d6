package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// chatReq is a streamed chat request that asks for usage.
const chatReq = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`

// TestReasoningOutsideCompletionIsBilled: xAI's OpenAI-compatible API
// counts reasoning tokens apart from completion_tokens ("separated from the
// completion_tokens": Vertex AI's "Reasoning for Grok Models", whose example
// usage is the one below: prompt 663 + completion 50 + reasoning 124 =
// total_tokens 837). Read by OpenAI's rule, the ledger rated 50 output
// tokens where the provider bills 174 (a review). total_tokens says which
// rule a report follows: the reasoning is added to the completion, the
// event says so (reasoning_outside_completion), and the client is sent the
// billed usage in OpenAI's terms, streamed and not. A report by OpenAI's
// rule (total = prompt + completion) is billed as it is.
func TestReasoningOutsideCompletionIsBilled(t *testing.T) {
	const xai = `{"completion_tokens":50,"completion_tokens_details":{"accepted_prediction_tokens":0,"audio_tokens":0,"reasoning_tokens":124,"rejected_prediction_tokens":0},"cost_in_usd_ticks":0,"num_sources_used":0,"prompt_tokens":663,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":654,"image_tokens":0,"text_tokens":663},"total_tokens":837}`
	const openai = `{"prompt_tokens":663,"completion_tokens":174,"total_tokens":837,"completion_tokens_details":{"reasoning_tokens":124}}`
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	stream := func(u string) string {
		return chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"grok-4","choices":[{"index":0,"delta":{"content":"I am Grok, an AI assistant built by xAI."},"finish_reason":null}]}`) +
			chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"grok-4","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) +
			chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"grok-4","choices":[],"usage":`+u+`}`) + "data: [DONE]\n\n"
	}
	body := func(u string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"grok-4","choices":[{"index":0,"message":{"role":"assistant","content":"I am Grok."},"finish_reason":"stop"}],"usage":` + u + `}`
	}
	// The usage the client reads: the stream's usage chunk, or the body's.
	clientUsage := func(t *testing.T, got string, streamed bool) (prompt, completion, total int64) {
		t.Helper()
		data := got
		if streamed {
			data = ""
			for _, line := range strings.Split(got, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"usage"`) {
					data = d
				}
			}
		}
		var c struct {
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
				TotalTokens      int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("the client's usage %q: %v\n%s", data, err, got)
		}
		return c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.TotalTokens
	}
	for _, c := range []struct {
		name, usage string
		outside     bool
	}{{"xai", xai, true}, {"openai", openai, false}} {
		for _, streamed := range []bool{true, false} {
			name := c.name + " body"
			up := jsonUpstream(t, "application/json", body(c.usage))
			req := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
			if streamed {
				name = c.name + " stream"
				up = jsonUpstream(t, "text/event-stream", stream(c.usage))
				req = chatReq
			}
			t.Run(name, func(t *testing.T) {
				e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/chat/completions", req)
				if e.Usage.PromptTokens != 663 || e.Usage.CompletionTokens != 174 || e.Usage.ReasoningTokens != 124 || e.UsageSource != usage.SourceUpstream {
					t.Errorf("billed %+v (%s, corrections %q): want prompt 663, completion 174 of which reasoning 124", e.Usage, e.UsageSource, e.Corrections)
				}
				if got := usage.HasCorrection(e.Corrections, usage.CorrectionReasoningOutsideCompletion); got != c.outside {
					t.Errorf("corrections %q: reasoning_outside_completion %v, want %v", e.Corrections, got, c.outside)
				}
				if p, comp, total := clientUsage(t, got, streamed); p != 663 || comp != 174 || total != 837 {
					t.Errorf("the client reads prompt %d, completion %d, total %d; billed 663, 174, 837", p, comp, total)
				}
			})
		}
	}
}
