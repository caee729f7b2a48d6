package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// bodyStack is a gateway whose providers of each type (models "om",
// "cl", "gem") answer every request with body, as application/json.
func bodyStack(t *testing.T, body string) *stack {
	t.Helper()
	return typedStack(t, "application/json", body)
}

// sseStack is bodyStack answering with body as text/event-stream.
func sseStack(t *testing.T, body string) *stack {
	t.Helper()
	return typedStack(t, "text/event-stream", body)
}

// typedStack is bodyStack answering with body under contentType.
func typedStack(t *testing.T, contentType, body string) *stack {
	t.Helper()
	return encodedStack(t, contentType, "", body)
}

// wholeAnswers are a whole answer of every route, with the request it
// answers and the usage it bills.
var wholeAnswers = []struct {
	name, path, req, body string
	want                  usage.Tokens
}{
	{"chat", "/v1/chat/completions", `{"model":"om","messages":[{"role":"user","content":"hello there"}]}`,
		`{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"the whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":340,"total_tokens":361}}`,
		usage.Tokens{PromptTokens: 21, CompletionTokens: 340}},
	{"chat stream answered with a body", "/v1/chat/completions", `{"model":"om","stream":true,"messages":[{"role":"user","content":"hello there"}]}`,
		`{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"the whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":340,"total_tokens":361}}`,
		usage.Tokens{PromptTokens: 21, CompletionTokens: 340}},
	{"legacy completions", "/v1/completions", `{"model":"om","prompt":"hello"}`,
		`{"id":"c","object":"text_completion","created":1,"model":"gpt-x","choices":[{"text":"hi","index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":77,"completion_tokens":88,"total_tokens":165}}`,
		usage.Tokens{PromptTokens: 77, CompletionTokens: 88}},
	{"embeddings", "/v1/embeddings", `{"model":"om","input":"hello"}`,
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"gpt-x","usage":{"prompt_tokens":77,"total_tokens":77}}`,
		usage.Tokens{PromptTokens: 77}},
	{"responses", "/v1/responses", `{"model":"om","input":"hello"}`,
		`{"id":"resp_1","object":"response","status":"completed","model":"gpt-x","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":77,"input_tokens_details":{"cached_tokens":7},"output_tokens":88,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":165}}`,
		usage.Tokens{PromptTokens: 77, CachedTokens: 7, CompletionTokens: 88, ReasoningTokens: 8}},
	{"anthropic native", "/anthropic/v1/messages", `{"model":"cl","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`,
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_read_input_tokens":200,"output_tokens":50}}`,
		usage.Tokens{PromptTokens: 210, CachedTokens: 200, CompletionTokens: 50}},
	{"anthropic chat", "/v1/chat/completions", `{"model":"cl","messages":[{"role":"user","content":"hello"}]}`,
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_read_input_tokens":200,"output_tokens":50}}`,
		usage.Tokens{PromptTokens: 210, CachedTokens: 200, CompletionTokens: 50}},
	{"gemini native", "/gemini/v1beta/models/gem:generateContent", `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"hi there"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":40,"thoughtsTokenCount":5,"totalTokenCount":75}}`,
		usage.Tokens{PromptTokens: 30, CompletionTokens: 45, ReasoningTokens: 5}},
	{"gemini chat", "/v1/chat/completions", `{"model":"gem","messages":[{"role":"user","content":"hello"}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"hi there"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":40,"thoughtsTokenCount":5,"totalTokenCount":75}}`,
		usage.Tokens{PromptTokens: 30, CompletionTokens: 45, ReasoningTokens: 5}},
}

// TestAnswerWithAByteOrderMarkIsBilledFromItsUsage: an upstream (a
// proxy on .NET or Windows writes one) that began its whole JSON answer
// with a UTF-8 byte order mark lost the provider's usage on every route:
// the body was unreadable to the gateway's decoders, so a chat, legacy
// completions, Responses or native answer was billed an estimate (here
// 73 completion tokens for the provider's 340), its event an
// upstream_error, and a translated chat answer (Anthropic, Gemini) or an
// embeddings answer was refused 502 though the provider had answered. The
// mark says nothing (JSON is UTF-8, RFC 8259 has it ignored): it is now
// dropped from a whole body before it is read, and the answer billed as
// the provider reported it.
func TestAnswerWithAByteOrderMarkIsBilledFromItsUsage(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	for _, c := range wholeAnswers {
		t.Run(c.name, func(t *testing.T) {
			st := bodyStack(t, bom+c.body)
			resp := st.post(t, c.path, c.req)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
				t.Fatalf("client: %d %.300s", resp.StatusCode, b)
			}
			if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage != c.want || e.Error != "" {
				t.Fatalf("event: status %s, source %s, usage %+v, error %q; want ok, upstream, %+v",
					e.Status, e.UsageSource, e.Usage, e.Error, c.want)
			}
		})
	}
}
