package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// Token counting (Anthropic's count_tokens, Gemini's :countTokens) goes to
// a model's deployments as its requests do, but was relayed as the first
// one answered: a web page under a 200 reached the client as the count, and
// a 404 saying the deployment's model or URL was not found as the client's
// own, no other deployment tried and the broken one never resting.
var (
	anthropicCount = errorUnder200Request{"/anthropic/v1/messages/count_tokens",
		`{"model":"claude-flaky","messages":[{"role":"user","content":"hi there"}]}`, []string{"x-api-key", testKey}}
	geminiCount = errorUnder200Request{"/gemini/v1beta/models/gemini-flaky:countTokens",
		`{"contents":[{"role":"user","parts":[{"text":"hi there"}]}]}`, []string{"x-goog-api-key", testKey}}
)

// TestTokenCountingFailsOver: the deployment's failures of this family
// send the count to the next deployment (the fallback's), and rest the
// failed one; token counting still makes no event.
func TestTokenCountingFailsOver(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		answer errorAnswer
		req    errorUnder200Request
		want   string // in the fallback's count
	}{
		{"anthropic, a web page", http.StatusOK, portalPage, anthropicCount, `"input_tokens":`},
		{"anthropic, the model gone", http.StatusNotFound, jsonOf(anthropicModelGone), anthropicCount, `"input_tokens":`},
		{"anthropic, the URL wrong", http.StatusNotFound, anthropicNoPath, anthropicCount, `"input_tokens":`},
		{"gemini, a web page with no Content-Type", http.StatusOK, bareWebPage, geminiCount, `"totalTokens":`},
		{"gemini, the model gone", http.StatusNotFound, jsonOf(geminiModelGone), geminiCount, `"totalTokens":`},
		{"gemini, an empty 404", http.StatusNotFound, emptyNotFound, geminiCount, `"totalTokens":`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := refusingStack(t, c.status, c.answer, nil)
			for i := range 2 {
				code, body, _ := st.send(t, c.req)
				if code != http.StatusOK || !strings.Contains(body, c.want) {
					t.Fatalf("request %d: client got %d %s, want the fallback's count", i, code, body)
				}
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("the failing upstream got %d requests, want 1 (then resting)", n)
			}
			time.Sleep(20 * time.Millisecond)
			if n := st.sink.count(); n != 0 {
				t.Errorf("%d events for token counting", n)
			}
		})
	}
}

// TestTokenCountingOnTheLastAttempt: with no deployment left, the client
// gets 502 in its envelope saying what failed, not the page or the 404;
// the deployment rests, and the next count goes to the fallback.
func TestTokenCountingOnTheLastAttempt(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		answer errorAnswer
		req    errorUnder200Request
		says   string
		code   string // the envelope's
	}{
		{"anthropic, a web page", http.StatusOK, portalPage, anthropicCount, "not an API answer", "api_error"},
		{"anthropic, the model gone", http.StatusNotFound, jsonOf(anthropicModelGone), anthropicCount, "model was not found", "api_error"},
		{"gemini, the URL wrong", http.StatusNotFound, htmlNotFound, geminiCount, "URL was not found", "UNAVAILABLE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := refusingStack(t, c.status, c.answer, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			code, body, _ := st.send(t, c.req)
			if code != http.StatusBadGateway || !strings.Contains(body, c.says) || !strings.Contains(body, c.code) ||
				strings.Contains(body, "Wi-Fi") || strings.Contains(body, "nginx") {
				t.Fatalf("client got %d %s, want 502 saying %q", code, body, c.says)
			}
			if code, body, _ := st.send(t, c.req); code != http.StatusOK {
				t.Fatalf("second request: %d %s, want the fallback's count while the failed deployment rests", code, body)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("the failing upstream got %d requests, want 1", n)
			}
		})
	}
}

// TestTokenCountingRelaysTheClientsNotFound: a 404 that is the client's
// own (a file it named) reaches it as it came, resting nothing.
func TestTokenCountingRelaysTheClientsNotFound(t *testing.T) {
	st, hits := refusingStack(t, http.StatusNotFound,
		jsonOf(`{"type":"error","error":{"type":"not_found_error","message":"File not found: file_1"}}`), nil)
	for i := range 2 {
		code, body, _ := st.send(t, anthropicCount)
		if code != http.StatusNotFound || !strings.Contains(body, "file_1") {
			t.Fatalf("request %d: client got %d %s, want the upstream's 404", i, code, body)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the upstream got %d requests, want 2: a client's 404 rests nothing", n)
	}
}
