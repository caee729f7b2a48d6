package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestNativePromptMemberSpelledTwiceIsRefused: the native routes estimate
// a prompt with encoding/json (openai.ResponsesPrompt, anthropic.PromptText,
// gemini.Prompt), which matches keys without regard to case, the last one
// winning, while the body goes upstream as it is, to a provider that reads
// its exact key. With "input":[a long prompt],"Input":"hi", OpenAI was sent
// the long prompt and a stream cut short before its usage report was
// billed the estimate of "hi" (a few tokens for about 1,000): the hole the
// chat route's checkPassedKeys closed for "messages" and "tools", left
// open on /v1/responses, /anthropic/v1/messages and Gemini's
// generateContent. Such a body is refused before any upstream call.
func TestNativePromptMemberSpelledTwiceIsRefused(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("ledger ", 1000))
	hi := `"hi"`
	for _, c := range []struct{ name, typ, path, body, stream string }{
		{"responses input", "openai", "/v1/responses",
			`{"model":"m","stream":true,"input":"` + words + `","Input":` + hi + `}`,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n"},
		{"responses instructions", "openai", "/v1/responses",
			`{"model":"m","stream":true,"input":"hi","instructions":"` + words + `","Instructions":` + hi + `}`,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n"},
		{"anthropic messages", "anthropic", "/anthropic/v1/messages",
			`{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"` + words + `"}],"Messages":[{"role":"user","content":` + hi + `}]}`,
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"},
		{"anthropic system", "anthropic", "/anthropic/v1/messages",
			`{"model":"m","stream":true,"max_tokens":10,"system":"` + words + `","SYSTEM":` + hi + `,"messages":[{"role":"user","content":"hi"}]}`,
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"},
		{"gemini contents", "gemini", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"` + words + `"}]}],"Contents":[{"role":"user","parts":[{"text":` + hi + `}]}]}`,
			"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"ok\"}]}}]}\n\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, c.stream)
			}))
			t.Cleanup(up.Close)
			st := oneProviderStack(t, c.typ, up.URL)
			resp := st.post(t, c.path, c.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "ambiguous") && calls.Load() == 0 {
				return
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			t.Fatalf("served %d (upstream called %d times), billed %d prompt tokens (%s) for a prompt of about 1,000 sent upstream; want 400 naming the ambiguous member",
				resp.StatusCode, calls.Load(), e.Usage.PromptTokens, e.UsageSource)
		})
	}
}
