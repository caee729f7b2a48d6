package gateway_test

import (
	"cmp"
	"io"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestNativeBodyThatIsNoAnswerBillsNothing: a JSON object that is no
// answer ("{}", a proxy's {"detail":...}) under a 200, on Anthropic's and
// Gemini's native routes and on /v1/responses, streamed or not, was
// recorded ok and billed its prompt, estimated, and the client got it with
// a usage the gateway wrote in, as if it were an answer (found by review).
// As on the chat route (TestBodyThatIsNoAnswerBillsNothing) and as an
// error object under a 200, it is an upstream_error that bills nothing,
// and the client gets the body as the upstream sent it. An answer of the
// route's shape with no usage is still estimated.
func TestNativeBodyThatIsNoAnswerBillsNothing(t *testing.T) {
	for _, c := range []struct{ name, typ, path, req, answer, ctype string }{
		{"anthropic", "anthropic", "/anthropic/v1/messages",
			`{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`,
			`{"type":"message","role":"assistant","content":[{"type":"text","text":"Hello, ledger"}]}`, ""},
		{"anthropic stream", "anthropic", "/anthropic/v1/messages",
			`{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`,
			`{"type":"message","role":"assistant","content":[{"type":"text","text":"Hello, ledger"}]}`, ""},
		{"anthropic stream under an SSE type", "anthropic", "/anthropic/v1/messages",
			`{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`,
			`{"type":"message","role":"assistant","content":[{"type":"text","text":"Hello, ledger"}]}`, "text/event-stream"},
		{"gemini", "gemini", "/gemini/v1beta/models/m:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"Say hello to the ledger"}]}]}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello, ledger"}]}}]}`, ""},
		{"gemini stream", "gemini", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"Say hello to the ledger"}]}]}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello, ledger"}]}}]}`, ""},
		{"responses", "openai", "/v1/responses",
			`{"model":"m","input":"Say hello to the ledger"}`,
			`{"object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello, ledger"}]}]}`, ""},
	} {
		for _, body := range []string{`{}`, `{"detail":"Not Found"}`} {
			t.Run(c.name+" "+body, func(t *testing.T) {
				st := oneProviderStack(t, c.typ, jsonUpstream(t, cmp.Or(c.ctype, "application/json"), body).URL)
				resp := st.post(t, c.path, c.req)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(got) != body {
					t.Fatalf("client got %d %s: want the body as the upstream sent it", resp.StatusCode, got)
				}
				e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
				if e.Status != usage.StatusUpstreamError || e.Usage.Total() != 0 || e.Error == "" {
					t.Fatalf("event %s (%q), usage %+v (%s): want an upstream_error billing nothing", e.Status, e.Error, e.Usage, e.UsageSource)
				}
			})
		}
		t.Run(c.name+" an answer without usage", func(t *testing.T) {
			st := oneProviderStack(t, c.typ, jsonUpstream(t, cmp.Or(c.ctype, "application/json"), c.answer).URL)
			resp := st.post(t, c.path, c.req)
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Status != usage.StatusOK || e.UsageSource != usage.SourceEstimated || e.Usage.PromptTokens == 0 || e.Usage.CompletionTokens == 0 {
				t.Fatalf("event %s (%q), usage %+v (%s): want ok, estimated", e.Status, e.Error, e.Usage, e.UsageSource)
			}
		})
	}
}
