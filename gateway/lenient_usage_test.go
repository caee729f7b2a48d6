package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestUsageBesideAFieldOfAnotherTypeIsBilled: an OpenAI-compatible server
// that writes its chunks' "id" as a number has every chunk read
// leniently. Its usage chunk's figures were dropped with the id (the
// chunk's decode failed, so no count was trusted) and the request billed
// an estimate; the usage is read on its own, and the upstream's figures
// are billed as its own.
func TestUsageBesideAFieldOfAnotherTypeIsBilled(t *testing.T) {
	body := `data: {"id":7,"object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + loremAnswer + `"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":7,"object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":7,"object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":150,"total_tokens":161,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\ndata: [DONE]\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := newStack(t, oneUpstream(up.URL))
	e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(got, "amet") || strings.Contains(got, `"usage"`) {
		t.Errorf("a client that did not ask for usage got:\n%s", strings.ReplaceAll(got, loremAnswer, "…"))
	}
	want := usage.Tokens{PromptTokens: 11, CachedTokens: 8, CompletionTokens: 150}
	if e.UsageSource != usage.SourceUpstream || e.Usage != want {
		t.Fatalf("billed %+v (%s); the upstream reported %+v", e.Usage, e.UsageSource, want)
	}
}
