package gateway_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestUserInfoCredentialsAreScrubbed: a provider whose base_url carries
// its credential as user info (https://user:pass@host/v1, sent as basic
// auth) has that password, and the basic auth value made of it, kept from
// the client like an API key: an upstream that echoed either passed it on
// (only the whole base_url and its host were scrubbed; found by review).
func TestUserInfoCredentialsAreScrubbed(t *testing.T) {
	const pass = "pw-live-0123456789abcdef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, got, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"bad request from %s with password %s (%s)","type":"invalid_request_error"}}`,
			user, got, r.Header.Get("Authorization"))
	}))
	defer echo.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "echo", Type: "openai",
			BaseURL: strings.Replace(echo.URL, "http://", "http://tenant:"+pass+"@", 1) + "/v1"})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"echo/m","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	token := base64.StdEncoding.EncodeToString([]byte("tenant:" + pass))
	if !strings.Contains(string(b), "bad request") {
		t.Fatalf("the upstream's refusal did not reach the client: %d %s", resp.StatusCode, b)
	}
	if strings.Contains(string(b), pass) || strings.Contains(string(b), token) {
		t.Errorf("the client sees the provider's password or basic auth: %s", b)
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if strings.Contains(e.Error, pass) || strings.Contains(e.Error, token) {
		t.Errorf("the event keeps the provider's password or basic auth: %q", e.Error)
	}
}
