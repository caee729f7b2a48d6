package gateway_test

import (
	"strings"
	"testing"
)

// TestChatRouteSendsOneFinishPerAnthropicMessageDelta: Anthropic documents
// "one or more message_delta events". When a repeat carries the stop_reason
// again (the same cumulative count, 50 and 50), the chat route translates
// each into a finish chunk, so the OpenAI client reads finish_reason twice
// for one choice; OpenAI streams end a choice once.
func TestChatRouteSendsOneFinishPerAnthropicMessageDelta(t *testing.T) {
	body := anthText + anthDeltaN(50) + anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/v1/chat/completions",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if n := strings.Count(got, `"finish_reason":"stop"`); n != 1 || e.Usage.CompletionTokens != 50 {
		t.Errorf("the client read %d finish chunks, want 1; event %+v; the stream:\n%s", n, e.Usage, got)
	}
}
