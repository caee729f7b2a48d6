package gateway_test

import (
	"strings"
	"testing"
)

// TestShadowedOutputIsNotFree: an answer with no usage whose text is
// spelled twice, exactly and in another case, the other one empty
// ("content":"…600 tokens…","Content":""), is read by the tap with
// encoding/json, the last of such keys winning: no output. The Python
// and JavaScript SDKs read the key spelled exactly, and show the text.
// Gemini's tap counts such a chunk whole (gemini/shadow.go); the chat
// route, /anthropic/v1/messages and /v1/responses billed the answer 0
// completion tokens, streamed or not: what reaches the client is never
// free.
func TestShadowedOutputIsNotFree(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("ledger entry ", 300))
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	for _, c := range []struct {
		name, typ, path, ct, body, req string
		header                         []string
	}{
		{"chat streamed", "openai", "/v1/chat/completions", "text/event-stream",
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + long + `","Content":""},"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil},
		{"chat", "openai", "/v1/chat/completions", "application/json",
			`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` + long + `","Content":""},"finish_reason":"stop"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil},
		{"anthropic", "anthropic", "/anthropic/v1/messages", "application/json",
			`{"id":"msg","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + long + `","Text":""}],"stop_reason":"end_turn"}`,
			`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, []string{"x-api-key", testKey}},
		{"anthropic streamed", "anthropic", "/anthropic/v1/messages", "text/event-stream",
			ev("message_start", `{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`) +
				ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+long+`","Text":""}}`),
			`{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, []string{"x-api-key", testKey}},
		{"responses", "openai", "/v1/responses", "application/json",
			`{"id":"r","object":"response","status":"completed","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + long + `","Text":""}]}]}`,
			`{"model":"m","input":"hi"}`, nil},
		{"responses streamed", "openai", "/v1/responses", "text/event-stream",
			ev("response.created", `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m"}}`) +
				ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"`+long+`","Delta":""}`),
			`{"model":"m","stream":true,"input":"hi"}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := oneProviderStack(t, c.typ, jsonUpstream(t, c.ct, c.body).URL)
			resp := st.post(t, c.path, c.req, c.header...)
			b, _ := readAllErr(resp)
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if !strings.Contains(string(b), long) {
				t.Fatalf("the client did not get the text:\n%s", b)
			}
			if e.Usage.CompletionTokens < 600 {
				t.Errorf("billed %+v (%s); the client read some 600 tokens of text", e.Usage, e.UsageSource)
			}
		})
	}
}
