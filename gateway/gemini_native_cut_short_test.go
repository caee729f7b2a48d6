package gateway_test

import (
	"io"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestGeminiNativeStreamWithoutItsFinishReasonIsCut: a Gemini stream
// ends with a chunk whose candidate has its finishReason (STOP,
// MAX_TOKENS, SAFETY...); one whose body closes cleanly after chunks
// without it, or in the middle of a chunk's JSON, was cut short upstream.
// The chat route records it so (upstream_error, "cut short", the client
// told in an error chunk); the native route, given the same bytes,
// recorded the request ok, with no error, and its deployment's health
// untouched. Both routes should record the cut; the native client still
// gets every byte as it came.
func TestGeminiNativeStreamWithoutItsFinishReasonIsCut(t *testing.T) {
	st, serve := scriptedStack(t)
	chunk := func(text string, n int) string {
		return `data: {"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"},"index":0}],` +
			`"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":` + itoa(n) + `,"thoughtsTokenCount":30,"totalTokenCount":` + itoa(50+n) + `}}` + "\n\n"
	}
	last := chunk(" and a longer sentence that never ends", 10)
	for name, body := range map[string]string{
		"closed between chunks": chunk("Hello", 1) + chunk(" world", 2),
		"closed mid-chunk":      chunk("Hello", 1) + chunk(" world", 2) + last[:len(last)/2],
	} {
		serve(body)
		for _, c := range []struct{ path, req string }{
			{"/v1/chat/completions", `{"model":"gem","stream":true,"messages":[{"role":"user","content":"hello there"}]}`},
			{"/gemini/v1beta/models/gem:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hello there"}]}]}`},
		} {
			resp := st.post(t, c.path, c.req)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if !strings.Contains(string(got), " world") {
				t.Errorf("%s, %s: the client did not get the output: %s", name, c.path, got)
			}
			if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "cut short") {
				t.Errorf("%s, %s: event %s (%q), want upstream_error naming the cut", name, c.path, e.Status, e.Error)
			}
			if e.Usage.PromptTokens != 20 || e.Usage.CompletionTokens != 32 || e.UsageSource != usage.SourcePartial {
				t.Errorf("%s, %s: billed %+v (%s), want the last whole report, partial", name, c.path, e.Usage, e.UsageSource)
			}
		}
	}
}
