package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnswerPastTheBodyBoundIsNotRelayedCut: the gateway reads at most
// 64 MiB of a whole upstream answer (docs/operations.md, Limits), and read
// past it as if the body ended there. A chat answer longer than that
// reached the client as a 200 whose JSON was cut off at 64 MiB, and was
// billed as an unreadable answer: its 64 MiB estimated with the tokenizer
// (13 million completion tokens, some ten seconds of CPU); the same
// answer to a stream request gave the client an error event and still
// billed those 13 million tokens. An answer past the bound is now an
// upstream failure, as a body cut off mid-way is: 502, the event an
// upstream_error naming the bound, no output billed, none having reached
// the client.
func TestAnswerPastTheBodyBoundIsNotRelayedCut(t *testing.T) {
	text := strings.Repeat("word ", (65<<20)/5)
	st := bodyStack(t, `{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"gpt-x",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"`+text+`"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":21,"completion_tokens":17000000,"total_tokens":17000021}}`)
	for _, req := range []string{
		`{"model":"om","messages":[{"role":"user","content":"hello there"}]}`,
		`{"model":"om","stream":true,"messages":[{"role":"user","content":"hello there"}]}`,
	} {
		resp := st.post(t, "/v1/chat/completions", req)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "64 MiB") {
			t.Errorf("%s: client: %d %.200s; want 502 naming the bound", req, resp.StatusCode, b)
		}
		if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "64 MiB") || e.Usage.CompletionTokens != 0 {
			t.Errorf("%s: event: status %s, source %s, usage %+v, error %.120q; want an upstream_error naming the bound, no output billed",
				req, e.Status, e.UsageSource, e.Usage, e.Error)
		}
	}
}
