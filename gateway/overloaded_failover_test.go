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
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnthropicOverloadedAfterMessageStartFailsOver: Anthropic's usual
// overload is a 200 whose stream is a message_start (no content), perhaps
// a ping, then an error event (overloaded_error). Nothing of the answer
// has come: the gateway holds message_start and pings back until the
// first event that carries output, so that such a refusal goes to the
// next deployment as a 529 before the stream would. The client got the
// error (the chat route had sent the role chunk, the native route the
// message_start), and no other deployment was tried.
func TestAnthropicOverloadedAfterMessageStartFailsOver(t *testing.T) {
	const (
		messageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"
		ping         = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
		overloaded   = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	)
	// A long prompt's message_start comes seconds after the request: the
	// hold's bound (MaxHeadWait) counts from it, not from the request.
	slow := gateway.MaxHeadWait + 500*time.Millisecond
	for _, c := range []struct {
		name   string
		body   string
		native bool
		delay  time.Duration // before the upstream's first byte
	}{
		{"chat route", messageStart + overloaded, false, 0},
		{"chat route, after a ping", messageStart + ping + overloaded, false, 0},
		{"chat route, after a slow start", messageStart + overloaded, false, slow},
		{"native route", messageStart + overloaded, true, 0},
		{"native route, after a ping", messageStart + ping + overloaded, true, 0},
		{"native route, after a slow start", messageStart + overloaded, true, slow},
	} {
		t.Run(c.name, func(t *testing.T) {
			good := "sim"
			if c.native {
				good = "sim-anthropic"
			}
			st, hits := badThenSpare(t, "anthropic", good, c.body, c.delay, true)
			var resp *http.Response
			if c.native {
				resp = st.post(t, "/anthropic/v1/messages", `{"model":"mid","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi there"}]}`,
					"x-api-key", testKey)
			} else {
				resp = st.post(t, "/v1/chat/completions", `{"model":"mid","stream":true,"messages":[{"role":"user","content":"hi there"}]}`)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if hits.Load() != 1 {
				t.Fatalf("the overloaded deployment got %d calls, want 1", hits.Load())
			}
			if resp.StatusCode != 200 || strings.Contains(string(b), "overloaded") || strings.Contains(string(b), "msg_1") {
				t.Fatalf("status %d, the client got the refused attempt's bytes: %s", resp.StatusCode, b)
			}
			st.servedBySpare(t, resp.Header.Get("X-Request-Id"), true)
		})
	}
}

// badThenSpare is a stack whose model "mid" is one deployment of type typ
// ("bad") answering every request with body as an SSE stream, which then
// ends, delay after the request, falling back (when fallback) to "spare",
// served by the stack's provider good. It returns the stack and the bad
// upstream's calls.
func badThenSpare(t *testing.T, typ, good, body string, delay time.Duration, fallback bool) (*stack, *atomic.Int64) {
	t.Helper()
	hits := new(atomic.Int64)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(bad.Close)
	st := newStack(t, func(cfg *gateway.Config) {
		cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "bad", Type: typ, BaseURL: bad.URL + "/v1"})
		mid := gateway.ModelConfig{Name: "mid", Deployments: []gateway.DeploymentConfig{{Name: "bad", Provider: "bad", UpstreamModel: "m"}}}
		if fallback {
			mid.Fallbacks = []string{"spare"}
		}
		cfg.Models = append(cfg.Models, mid,
			gateway.ModelConfig{Name: "spare", Deployments: []gateway.DeploymentConfig{{Name: "good", Provider: good, UpstreamModel: "sim-small"}}})
		cfg.Retry.Cooldown = time.Hour
	})
	return st, hits
}

// servedBySpare checks that request id was served by "spare" on its
// second attempt (badThenSpare), after one failed attempt of "bad":
// upstream_error, not charged, and, when billsNothing (a refusal), no
// usage.
func (st *stack) servedBySpare(t *testing.T, id string, billsNothing bool) {
	t.Helper()
	e := st.sink.event(t, id)
	if e.Deployment != "good" || e.Status != usage.StatusOK || e.NotCharged || e.Attempt != 2 {
		t.Fatalf("served by %s (attempt %d), %s, not charged %v; want the good deployment's second attempt, ok", e.Deployment, e.Attempt, e.Status, e.NotCharged)
	}
	var failed int
	for _, a := range st.sink.eventsOf(id) {
		if a.ID != id {
			failed++
			if !a.NotCharged || a.Status != usage.StatusUpstreamError || billsNothing && a.Usage.Total() != 0 {
				t.Errorf("the failed attempt: %+v; want upstream_error, not charged (nothing billed: %v)", a, billsNothing)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("%d failed attempts recorded, want 1", failed)
	}
}
