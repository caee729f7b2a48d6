package gateway_test

import (
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUpstreamHTMLTypeIsNotRelayed: an upstream (a misconfigured
// OpenAI-compatible server, or one in an attacker's hands) that labels its
// answer text/html had the label relayed as is, on the chat, native and
// token-counting routes. The answer holds the model's output, which a
// prompt can make "<script>…</script>": a browser sent to the gateway (a
// cross-site form post with ?key=, which the Gemini routes take) ran it
// as a page of the gateway's origin, the portal's. The client gets the
// route's own type (JSON) and the answer says nothing may run in it.
func TestUpstreamHTMLTypeIsNotRelayed(t *testing.T) {
	chat := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"<script>alert(document.domain)</script>"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`
	gem := `{"candidates":[{"content":{"role":"model","parts":[{"text":"<script>alert(1)</script>"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":5,"totalTokenCount":8}}`
	for _, c := range []struct {
		name, typ, path, req, answer string
	}{
		{"chat", "openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, chat},
		{"gemini native", "gemini", "/gemini/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, gem},
		{"gemini count", "gemini", "/gemini/v1beta/models/m:countTokens", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, `{"totalTokens":3}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = io.WriteString(w, c.answer)
			}))
			t.Cleanup(up.Close)
			st := nativeStack(t, c.typ, up.URL, 0)
			resp := st.post(t, c.path, c.req)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			csp := resp.Header.Get("Content-Security-Policy")
			if resp.StatusCode != http.StatusOK || mt != "application/json" || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "sandbox") {
				t.Fatalf("%d Content-Type %q Content-Security-Policy %q; want 200 application/json that runs nothing (default-src 'none', sandbox); body %s",
					resp.StatusCode, resp.Header.Get("Content-Type"), csp, b)
			}
		})
	}
}
