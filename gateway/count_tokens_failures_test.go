package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// Token counting failed over on a web page and a 404 of the deployment's
// model or URL, but relayed every other failure a request takes as the
// deployment's from the deployment it reached: an unreachable or silent
// upstream, a 401 or 402 of the deployment's own key or account (which a
// client read as its gateway key refused), Gemini's API_KEY_INVALID, a
// 408, 429 or 5xx, a 3xx, a 2xx other than 200, a provider's error under
// a 200; no other deployment tried, and the failed one never resting.

// countUpstream is how the bad deployments (bad-anthropic, bad-gemini of
// refusingStack) answer a count: status, Content-Type JSON and body, with
// header; hang: never (until the gateway hangs up); down: nothing listens.
type countUpstream struct {
	status     int
	body       string
	header     []string
	hang, down bool
}

const (
	anthropicKeyRefused = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`
	anthropicNoCredit   = `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low"}}`
	geminiKeyRefused    = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	anthropicRateLimited = `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
)

// countStack is refusingStack with its bad deployments answering as u
// does (a count of their requests in *hits), with connect_timeout 300ms
// and stall_timeout 600ms.
func countStack(t *testing.T, u countUpstream, edit func(*gateway.Config)) (*stack, *atomic.Int64) {
	t.Helper()
	return countStackOn(t, u.down, func(w http.ResponseWriter, r *http.Request, _ int64) {
		if u.hang {
			<-r.Context().Done()
			return
		}
		for i := 0; i+1 < len(u.header); i += 2 {
			w.Header().Set(u.header[i], u.header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(u.status)
		_, _ = io.WriteString(w, u.body)
	}, edit)
}

// countStackOn is countStack with its bad deployments answering as answer
// does (n: the count of their requests so far, this one's included), or,
// when down, with nothing listening.
func countStackOn(t *testing.T, down bool, answer func(w http.ResponseWriter, r *http.Request, n int64),
	edit func(*gateway.Config)) (*stack, *atomic.Int64) {
	t.Helper()
	hits := new(atomic.Int64)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		answer(w, r, n)
	}))
	t.Cleanup(bad.Close)
	if down {
		bad.Close()
	}
	st, _ := refusingStack(t, http.StatusOK, portalPage, func(c *gateway.Config) {
		for i := range c.Providers {
			p := &c.Providers[i]
			switch p.Name {
			case "bad-anthropic":
				p.BaseURL, p.ConnectTimeout, p.StallTimeout = bad.URL+"/v1", 300*time.Millisecond, 600*time.Millisecond
			case "bad-gemini":
				p.BaseURL, p.ConnectTimeout, p.StallTimeout = bad.URL+"/v1beta", 300*time.Millisecond, 600*time.Millisecond
			}
		}
		if edit != nil {
			edit(c)
		}
	})
	return st, hits
}

var countFailures = []struct {
	name string
	up   countUpstream
	req  errorUnder200Request
	// last: what the client gets with no deployment left, status and
	// words in the body (and the Retry-After, when relayed)
	status     int
	says       string
	retryAfter string
}{
	{"anthropic, the deployment's key refused", countUpstream{status: 401, body: anthropicKeyRefused}, anthropicCount,
		http.StatusBadGateway, "refused the gateway's credentials", ""},
	{"anthropic, the deployment's account cannot pay", countUpstream{status: 402, body: anthropicNoCredit}, anthropicCount,
		http.StatusBadGateway, "refused the gateway's credentials or account", ""},
	{"gemini, API_KEY_INVALID", countUpstream{status: 400, body: geminiKeyRefused}, geminiCount,
		http.StatusBadGateway, "refused the gateway's credentials", ""},
	{"anthropic, 429", countUpstream{status: 429, body: anthropicRateLimited, header: []string{"Retry-After", "7"}}, anthropicCount,
		http.StatusTooManyRequests, "slow down", "7"},
	{"gemini, 503", countUpstream{status: 503, body: overloadedGemini, header: []string{"Retry-After", "3"}}, geminiCount,
		http.StatusServiceUnavailable, "overloaded", "3"},
	{"anthropic, 408", countUpstream{status: 408, body: `{"type":"error","error":{"type":"timeout_error","message":"timed out"}}`}, anthropicCount,
		http.StatusRequestTimeout, "timed out", ""},
	{"anthropic, a redirect", countUpstream{status: 302, header: []string{"Location", "http://10.0.0.1/"}}, anthropicCount,
		http.StatusBadGateway, "a redirect", ""},
	{"gemini, a 202", countUpstream{status: 202, body: `{"queued":true}`}, geminiCount,
		http.StatusBadGateway, "not an answer", ""},
	{"anthropic, overloaded under a 200", countUpstream{status: 200, body: overloadedAnthropic}, anthropicCount,
		http.StatusOK, "overloaded_error", ""},
	{"anthropic, unreachable", countUpstream{down: true}, anthropicCount,
		http.StatusBadGateway, "could not be reached", ""},
	{"gemini, no answer within stall_timeout", countUpstream{hang: true}, geminiCount,
		http.StatusGatewayTimeout, "stall_timeout", ""},
}

// TestTokenCountingFailsOverAsARequest: each failure a request takes as
// the deployment's sends the count to the next deployment (the
// fallback's) and rests the failed one; still no event.
func TestTokenCountingFailsOverAsARequest(t *testing.T) {
	for _, c := range countFailures {
		t.Run(c.name, func(t *testing.T) {
			st, hits := countStack(t, c.up, nil)
			for i := range 2 {
				code, body, _ := st.send(t, c.req)
				if code != http.StatusOK || !strings.Contains(body, "okens\":") {
					t.Fatalf("count %d: client got %d %s, want the fallback's count", i, code, body)
				}
			}
			if n, want := hits.Load(), int64(1); !c.up.down && n != want {
				t.Errorf("the failing upstream got %d counts, want %d (then resting)", n, want)
			}
			time.Sleep(20 * time.Millisecond)
			if n := st.sink.count(); n != 0 {
				t.Errorf("%d events for token counting", n)
			}
		})
	}
}

// TestTokenCountingFailsOnTheLastAttemptAsARequest: with no deployment
// left, the client gets what a request would: 502 for the deployment's
// key or account (never the 401 that reads as its own key refused), a
// redirect or another 2xx; the 429, 5xx or 408 as it came with its
// Retry-After; 502 unreachable, 504 past connect_timeout. The deployment
// rests: the next count goes to the fallback.
func TestTokenCountingFailsOnTheLastAttemptAsARequest(t *testing.T) {
	for _, c := range countFailures {
		t.Run(c.name, func(t *testing.T) {
			st, hits := countStack(t, c.up, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			resp := st.post(t, c.req.path, c.req.body, c.req.header...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(b), c.says) {
				t.Fatalf("client got %d %s, want %d saying %q", resp.StatusCode, b, c.status, c.says)
			}
			if got := resp.Header.Get("Retry-After"); got != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, c.retryAfter)
			}
			if strings.Contains(string(b), "authentication_error") || strings.Contains(string(b), "API key not valid") {
				t.Errorf("the deployment's key refusal reached the client: %s", b)
			}
			if code, body, _ := st.send(t, c.req); code != http.StatusOK {
				t.Fatalf("second count: %d %s, want the fallback's count while the failed deployment rests", code, body)
			}
			if n := hits.Load(); !c.up.down && n != 1 {
				t.Errorf("the failing upstream got %d counts, want 1", n)
			}
		})
	}
}
