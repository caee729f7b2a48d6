package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// An upstream refusal is read up to a bound (64 KiB) and then scrubbed of
// the deployment's key: a key the upstream echoed across the bound was cut
// first, so what was left of it, its first part, was no longer the key to
// replace, and went to the client and into the event.
func TestAKeyEchoedAcrossTheCutIsScrubbed(t *testing.T) {
	const secret = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
	for _, kept := range []int{9, 20, len(secret) - 1} {
		t.Run(fmt.Sprintf("%d bytes of the key before the cut", kept), func(t *testing.T) {
			echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
				head := `{"error":{"type":"invalid_request_error","message":"`
				pad := strings.Repeat("x", 64<<10-len(head)-kept)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `%s%s%s"}}`, head, pad, key)
			}))
			defer echo.Close()
			st := newStack(t, func(c *gateway.Config) {
				c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "echo", Type: "openai", BaseURL: echo.URL + "/v1", APIKey: secret})
			})
			resp := st.post(t, "/v1/chat/completions", `{"model":"echo/m","messages":[{"role":"user","content":"hi"}]}`)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), secret[:9]) {
				t.Errorf("the client sees the first %d bytes of the provider's key: …%s", kept, b[max(0, len(b)-80):])
			}
			if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); strings.Contains(e.Error, secret[:9]) {
				t.Errorf("the event keeps the first bytes of the provider's key: …%s", e.Error[max(0, len(e.Error)-80):])
			}
		})
	}
}
