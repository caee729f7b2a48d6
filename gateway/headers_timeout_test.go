package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRequestTimeoutBoundsTheWaitForHeaders: request_timeout bounds a
// whole upstream request, but the wait for the answer's headers was
// bounded only by connect_timeout (a non-streamed answer's by
// stall_timeout, if longer): with request_timeout 4s, an upstream that
// never answered held a request 30 s (a docs review), and with the
// defaults a request_timeout below 5m let a non-streamed request run 5m.
// The wait for headers now ends at request_timeout when that comes first:
// a 504 naming request_timeout, recorded a timeout.
func TestRequestTimeoutBoundsTheWaitForHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that net/http sees the gateway hang up
		<-r.Context().Done()               // never answers
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		everyType(up.URL)(c)
		for i := range c.Providers {
			p := &c.Providers[i]
			p.ConnectTimeout, p.StallTimeout, p.RequestTimeout = 20*time.Second, time.Minute, 300*time.Millisecond
		}
	})
	for _, stream := range []string{"true", "false"} {
		t.Run("stream "+stream, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no answer before connect_timeout (20s) or the test's 15s: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "request_timeout") {
				t.Errorf("client got %d %.300s; want 504 naming request_timeout", resp.StatusCode, b)
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Status != usage.StatusTimeout || !strings.Contains(e.Error, "request_timeout") {
				t.Errorf("event %s %q; want a timeout at request_timeout", e.Status, e.Error)
			}
		})
	}
}
