package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestChatStreamForwardsAnUpstreamFrameCutMidLine: an OpenAI upstream whose
// body closes in the middle of a data line (`data: {"id":"c",...,"content":"tru`,
// no line end) has the gateway's chat relay forward that fragment to the
// client as a whole event (it adds the blank line that ends it), then its
// own error chunk. The fragment is not JSON, so the client's SDK fails on it
// (the OpenAI SDKs raise a JSON decode error) before it reaches the
// gateway's error chunk: the client sees a crash, not the cut short error.
// The SSE spec drops an event that the end of the input left unterminated;
// the chat route should drop (or at least not forward) one whose data does
// not parse, still counting it for billing as it does now.
func TestChatStreamForwardsAnUpstreamFrameCutMidLine(t *testing.T) {
	cut := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tru`
	for _, c := range []struct{ name, body string }{
		{"before the finish", chatEvent(`{"index":0,"delta":{"role":"assistant","content":""}}`) +
			chatEvent(`{"index":0,"delta":{"content":"hello "}}`) + cut},
		{"a usage chunk after the finish", chatEvent(`{"index":0,"delta":{"content":"hello "}}`) +
			chatEvent(`{"index":0,"delta":{},"finish_reason":"stop"}`) +
			`data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":10,"completion_tok`},
	} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, c.body)
		}))
		t.Cleanup(up.Close)
		st := oneProviderStack(t, "openai", up.URL)
		e, got := doRequest(t, st, "/v1/chat/completions",
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
		for _, ev := range strings.Split(got, "\n\n") {
			data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			if !json.Valid([]byte(data)) {
				t.Errorf("%s: the client got an event whose data is not JSON: %q (the whole stream: %q)", c.name, data, got)
			}
		}
		if e.Usage.CompletionTokens <= 0 {
			t.Errorf("%s: event %+v: the output relayed is not billed", c.name, e.Usage)
		}
	}
}
