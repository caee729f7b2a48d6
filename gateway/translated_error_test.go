package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestTranslatedUpstreamErrorInOpenAIEnvelope: on the OpenAI routes
// (chat completions, embeddings) served by an Anthropic or Gemini
// upstream, the upstream's refusal was relayed in its own shape:
// Anthropic's {"type":"error","error":{"type","message"}}, Gemini's
// {"error":{"code":429,"message","status":"RESOURCE_EXHAUSTED"}}, whose
// numeric code and missing type the OpenAI SDKs read as code 429 (a
// number, where OpenAI's is a string) and no type. The gateway's own
// routes answer in OpenAI's envelope (DESIGN: "Errors on the LLM
// surface"): the status and message are the upstream's, the type and code
// OpenAI's strings.
func TestTranslatedUpstreamErrorInOpenAIEnvelope(t *testing.T) {
	for _, c := range []struct {
		name, typ, path, body, upstream string
		status                          int
		wantType                        string
	}{
		{"anthropic 429 on chat", "anthropic", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, 429, "rate_limit_error"},
		{"gemini 429 on chat", "gemini", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			`{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`, 429, "rate_limit_error"},
		{"gemini 400 on embeddings", "gemini", "/v1/embeddings", `{"model":"m","input":"hi"}`,
			`{"error":{"code":400,"message":"slow down","status":"INVALID_ARGUMENT"}}`, 400, "invalid_request_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.upstream)
			}))
			t.Cleanup(up.Close)
			resp := oneProviderStack(t, c.typ, up.URL).post(t, c.path, c.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got struct {
				Type  *string `json:"type"`
				Error struct {
					Message string          `json:"message"`
					Type    string          `json:"type"`
					Code    json.RawMessage `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != c.status {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			var code string
			if got.Type != nil || got.Error.Message != "slow down" || got.Error.Type != c.wantType || json.Unmarshal(got.Error.Code, &code) != nil || code == "" {
				t.Fatalf("answer %s; want OpenAI's envelope: the upstream's message, type %q, a string code", b, c.wantType)
			}
		})
	}
}
