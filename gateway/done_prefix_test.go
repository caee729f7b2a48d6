package gateway_test

import (
	"strings"
	"testing"
)

// TestDoneWithTrailingBytes: OpenAI's SDKs end a stream at any data that
// starts with "[DONE]" (openai-python: `if sse.data.startswith("[DONE]"):
// break`; openai-node likewise). The gateway ended only at data equal to
// "[DONE]": an upstream's `data: [DONE] ` (a trailing space) was relayed as
// a chunk, counted as output (billed as late output, usage_source
// partial), and the usage chunk the client asked for came after it, where
// its SDK never reads it (a review).
func TestDoneWithTrailingBytes(t *testing.T) {
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	body := chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there"},"finish_reason":null}]}`) +
		chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) +
		chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`) +
		"data: [DONE] \n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := oneProviderStack(t, "openai", up.URL)
	e, got := doRequest(t, st, "/v1/chat/completions", chatReq)
	if e.Usage.CompletionTokens != 20 || e.UsageSource != "upstream" {
		t.Errorf("billed %+v (%s), want the upstream's 20 completion tokens", e.Usage, e.UsageSource)
	}
	// What an SDK reads: the events up to the first data starting with [DONE].
	var read []string
	for _, line := range strings.Split(got, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			if strings.HasPrefix(d, "[DONE]") {
				break
			}
			read = append(read, d)
		}
	}
	if len(read) == 0 || !strings.Contains(read[len(read)-1], `"usage"`) {
		t.Errorf("the client's SDK stops before the usage chunk it asked for:\n%s", got)
	}
}
