package gateway_test

import (
	"io"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestResponsesIncompleteSaysWhy: a Responses API answer ends
// "incomplete" for one of two reasons, incomplete_details.reason
// max_output_tokens or content_filter. Every incomplete answer was
// recorded with finish_reason "length", a content filter's too, where the
// chat route records Anthropic's refusal and Gemini's SAFETY as
// "content_filter". The reason is now read, streamed or not; the usage
// is the provider's either way.
func TestResponsesIncompleteSaysWhy(t *testing.T) {
	u := `{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":130}`
	want := usage.Tokens{PromptTokens: 100, CachedTokens: 40, CompletionTokens: 30, ReasoningTokens: 20}
	for reason, finish := range map[string]string{"max_output_tokens": "length", "content_filter": "content_filter"} {
		resp := `{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"` + reason + `"},"model":"gpt-x",` +
			`"output":[{"type":"message","content":[{"type":"output_text","text":"the answer, cut"}]}],"usage":` + u + `}`
		for _, stream := range []bool{false, true} {
			body, req := resp, `{"model":"om","input":"hello"}`
			st := bodyStack(t, body)
			if stream {
				st = sseStack(t, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"the answer, cut\"}\n\n"+
					"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":"+resp+"}\n\n")
				req = `{"model":"om","stream":true,"input":"hello"}`
			}
			r := st.post(t, "/v1/responses", req)
			_, _ = io.ReadAll(r.Body)
			r.Body.Close()
			e := st.sink.event(t, r.Header.Get("X-Request-Id"))
			if e.FinishReason != finish || e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage != want {
				t.Errorf("%s, stream %v: event finish_reason %q, status %s, source %s, usage %+v; want %q, ok, upstream, %+v",
					reason, stream, e.FinishReason, e.Status, e.UsageSource, e.Usage, finish, want)
			}
		}
	}
}
