package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestNativeUsageCountSpelledTwiceShowsBilled: a native answer whose usage
// spells a count twice, once exactly and once in another case
// ("input_tokens":1000000 beside "INPUT_TOKENS":10), is billed as
// encoding/json reads it (the last, 10), while the Python and JavaScript
// SDKs read the member spelled exactly (1,000,000). The chat route sends
// such an answer the usage billed (openai.Chunk.AmbiguousUsage); the
// native routes relayed it as it came, so the client read a count the
// ledger does not bill. They tell the usage billed, as for a count the
// gateway corrected (reportedAsBilled).
func TestNativeUsageCountSpelledTwiceShowsBilled(t *testing.T) {
	text := `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi there friend"}]}]`
	respUsage := `{"input_tokens":1000000,"INPUT_TOKENS":10,"output_tokens":5,"total_tokens":15}`
	resp := `{"id":"r","object":"response","status":"completed","model":"m","output":` + text + `,"usage":` + respUsage + `}`
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi there friend\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + resp + "}\n\n"
	for _, c := range []struct {
		name, typ, path, ct, body, req, want string
		header                               []string
	}{
		{"responses", "openai", "/v1/responses", "application/json", resp, `{"model":"m","input":"hi"}`, `"input_tokens":10`, nil},
		{"responses streamed", "openai", "/v1/responses", "text/event-stream", stream, `{"model":"m","stream":true,"input":"hi"}`, `"input_tokens":10`, nil},
		{"responses usage member spelled twice", "openai", "/v1/responses", "application/json",
			`{"id":"r","object":"response","status":"completed","model":"m","output":` + text +
				`,"usage":{"input_tokens":1000000,"output_tokens":5},"Usage":{"input_tokens":10,"output_tokens":5}}`,
			`{"model":"m","input":"hi"}`, `"input_tokens":10`, nil},
		{"anthropic", "anthropic", "/anthropic/v1/messages", "application/json",
			`{"id":"msg","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi there friend"}],"stop_reason":"end_turn",` +
				`"usage":{"input_tokens":1000000,"Input_Tokens":10,"output_tokens":5}}`,
			`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, `"input_tokens":10`, []string{"x-api-key", testKey}},
		{"gemini", "gemini", "/gemini/v1beta/models/m:generateContent", "application/json",
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi there friend"}]},"finishReason":"STOP"}],` +
				`"usageMetadata":{"promptTokenCount":1000000,"PromptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, `"promptTokenCount":10`, []string{"x-goog-api-key", testKey}},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := jsonUpstream(t, c.ct, c.body)
			e, got := doRequest(t, oneProviderStack(t, c.typ, up.URL), c.path, c.req, c.header...)
			if e.Usage.PromptTokens != 10 || e.Usage.CompletionTokens != 5 || e.UsageSource != usage.SourceUpstream {
				t.Fatalf("billed %+v (%s), want 10 prompt and 5 completion tokens as reported", e.Usage, e.UsageSource)
			}
			if strings.Contains(got, "1000000") || !strings.Contains(got, c.want) {
				t.Errorf("the client reads 1,000,000 input tokens (the member spelled exactly), the ledger bills 10:\n%s", got)
			}
		})
	}
}
