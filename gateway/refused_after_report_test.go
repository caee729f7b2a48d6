package gateway_test

import (
	"io"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnErrorFrameBeforeAnyOutputBillsNothingAfterAProgressReport: an
// upstream whose stream opens with a usage report of its prompt alone (a
// Gemini chunk whose usageMetadata counts only the prompt, a vLLM role
// chunk under continuous_usage_stats) and then sends its error frame, before
// any output, refused the request, as Anthropic's overloaded_error after
// message_start does: docs/billing.md, "An upstream that refused (an error
// frame before any output) ... bills nothing". The report before it is no
// bill: it was charged as partial, the prompt of an answer the client never
// got, only because the provider happened to report progress first. Output
// before the error keeps the prompt billed.
func TestAnErrorFrameBeforeAnyOutputBillsNothingAfterAProgressReport(t *testing.T) {
	st, serve := scriptedStack(t)
	const (
		geminiReport = `data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":20,"totalTokenCount":20},"modelVersion":"gemini-x"}` + "\n\n"
		geminiText   = `data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":1,"totalTokenCount":21},"modelVersion":"gemini-x"}` + "\n\n"
		geminiError  = `data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}` + "\n\n"
		vllmRole     = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"prompt_tokens":20,"completion_tokens":0,"total_tokens":20}}` + "\n\n"
		vllmError    = `data: {"error":{"message":"engine dead","type":"InternalServerError","code":500}}` + "\n\n"
		geminiNative = "/gemini/v1beta/models/gem:streamGenerateContent?alt=sse"
		geminiReq    = `{"contents":[{"role":"user","parts":[{"text":"hello there"}]}]}`
	)
	chat := func(model string) string {
		return `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there"}]}`
	}
	for _, c := range []struct {
		name, body, path, req string
		billed                bool
	}{
		{"gemini native", geminiReport + geminiError, geminiNative, geminiReq, false},
		{"gemini chat", geminiReport + geminiError, "/v1/chat/completions", chat("gem"), false},
		{"vllm chat", vllmRole + vllmError + "data: [DONE]\n\n", "/v1/chat/completions", chat("om"), false},
		{"gemini native, output first", geminiText + geminiError, geminiNative, geminiReq, true},
		{"gemini chat, output first", geminiText + geminiError, "/v1/chat/completions", chat("gem"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			serve(c.body)
			resp := st.post(t, c.path, c.req)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if !strings.Contains(string(got), "error") {
				t.Errorf("the client was not told of the error: %s", got)
			}
			if e.Status != usage.StatusUpstreamError || e.NotCharged {
				t.Errorf("event %s charged=%v (%q), want upstream_error, charged", e.Status, !e.NotCharged, e.Error)
			}
			switch {
			case !c.billed && e.Usage.Total() != 0:
				t.Errorf("billed %+v (%s) for a refusal before any output; want nothing", e.Usage, e.UsageSource)
			case c.billed && (e.Usage.PromptTokens != 20 || e.Usage.CompletionTokens < 1):
				t.Errorf("billed %+v (%s); want the prompt and the output relayed before the error", e.Usage, e.UsageSource)
			}
		})
	}
}
