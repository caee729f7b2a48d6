package gateway_test

import (
	"io"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestARawJSONErrorAfterAFinishReasonIsAnUpstreamError: an
// OpenAI-compatible upstream in Vertex AI's manner puts a finish reason on
// every chunk, and a failure mid-stream arrives as a raw JSON error body,
// not a data: frame (fixtures/gemini/vertex-error-mid-stream.sse shows
// both on Gemini's own protocol). The stream did not end with the answer:
// the event records an upstream error, whose text is not billed. Only the
// raw error itself says so here: the finish reason already seen keeps the
// stream from counting as cut short, so a relay that let the raw body
// pass without recording it recorded the failed stream as ok.
func TestARawJSONErrorAfterAFinishReasonIsAnUpstreamError(t *testing.T) {
	st, serve := scriptedStack(t)
	chunk := `data: {"id":"c","object":"chat.completion.chunk","model":"om","choices":[{"index":0,"delta":{"content":"The answer begins"},"finish_reason":"stop"}]}` + "\n\n"
	serve(chunk + chunk + "{\n  \"error\": {\n    \"code\": 499,\n    \"message\": \"The operation was cancelled.\",\n    \"status\": \"CANCELLED\"\n  }\n}\n")
	resp := st.post(t, "/v1/chat/completions", `{"model":"om","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusUpstreamError || e.FinishReason != "error" || !strings.Contains(e.Error, "CANCELLED") {
		t.Fatalf("event %s, finish %q, error %q; want upstream_error naming the upstream's raw error", e.Status, e.FinishReason, e.Error)
	}
	if e.Usage.CompletionTokens > 10 {
		t.Fatalf("billed %+v: the raw error's text counted as output", e.Usage)
	}
}
