package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// Token counting relayed an upstream's refusal that was no JSON error
// byte for byte: a proxy's HTML 503 or a text/plain 400 reached the
// client under the native route, which its SDK could not read as the
// protocol's error, where a request's was wrapped in the route's envelope.

// TestTokenCountingWrapsANonJSONRefusal: on the last attempt a 429, 5xx
// or 408, and a client's own 4xx, whose body is not a JSON error object
// reach the client in its route's envelope, with the upstream's status,
// Retry-After and words, as a request's do; the provider's credential and
// address, echoed in the body, are scrubbed.
func TestTokenCountingWrapsANonJSONRefusal(t *testing.T) {
	const key = "sk-count-secret-0123456789"
	for _, c := range []struct {
		name        string
		status      int
		contentType string
		body        string
		header      []string
		req         errorUnder200Request
		envelope    string // in the body: the route's own error shape
	}{
		{"anthropic, an nginx 503", 503, "text/html", "<html><body><h1>503 Service Temporarily Unavailable</h1>nginx</body></html>",
			[]string{"Retry-After", "3"}, anthropicCount, `"type":"error"`},
		{"gemini, a text/plain 400", 400, "text/plain; charset=utf-8", "bad request: no contents",
			nil, geminiCount, `"status":"INVALID_ARGUMENT"`},
		{"gemini, a 429 with no Content-Type", 429, "", "", []string{"Retry-After", "5"}, geminiCount, `"status":"RESOURCE_EXHAUSTED"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := countStackOn(t, false, func(w http.ResponseWriter, r *http.Request, _ int64) {
				for i := 0; i+1 < len(c.header); i += 2 {
					w.Header().Set(c.header[i], c.header[i+1])
				}
				w.Header().Set("Content-Type", c.contentType)
				w.WriteHeader(c.status)
				// A proxy that echoes what it was sent: the key, the address.
				_, _ = io.WriteString(w, c.body+" from http://"+r.Host+"/v1 with "+r.Header.Get("X-Api-Key")+r.Header.Get("X-Goog-Api-Key"))
			}, func(cfg *gateway.Config) {
				cfg.Retry.MaxAttempts = 1
				for i := range cfg.Providers {
					if strings.HasPrefix(cfg.Providers[i].Name, "bad-") {
						cfg.Providers[i].APIKey = key
					}
				}
			})
			resp := st.post(t, c.req.path, c.req.body, c.req.header...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var obj struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if resp.StatusCode != c.status || json.Unmarshal(b, &obj) != nil || !strings.Contains(string(b), c.envelope) ||
				!strings.Contains(obj.Error.Message, fmt.Sprintf("answered %d", c.status)) {
				t.Fatalf("client got %d %s, want %d in the route's envelope (%s)", resp.StatusCode, b, c.status, c.envelope)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
			if want := strings.Join(c.header, ""); want != "" && "Retry-After"+resp.Header.Get("Retry-After") != want {
				t.Errorf("Retry-After %q, want the upstream's (%s)", resp.Header.Get("Retry-After"), want)
			}
			if c.body != "" && !strings.Contains(obj.Error.Message, strings.TrimSpace(c.body)[:10]) {
				t.Errorf("message %q, want the upstream's words", obj.Error.Message)
			}
			if strings.Contains(string(b), key) || strings.Contains(string(b), "127.0.0.1") {
				t.Errorf("the provider's key or address reached the client: %s", b)
			}
		})
	}
}
