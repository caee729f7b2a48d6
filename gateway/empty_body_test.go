package gateway_test

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// An upstream that answers a whole-body request 200 with an empty body
// (a proxy or load balancer in front of the provider dropping the answer)
// served nothing, as a stream that closes before any data did, which
// fails over (README, "What gets recorded"); but the empty 200 reached the
// client as the answer (an SDK fails to parse it), with no failover and
// no cool-down: every request the deployment drew got nothing. Translated
// (Anthropic, Gemini on the chat route), it failed over, but its prompt
// was billed, estimated (the customer's charge when it is the last
// attempt: a 502 charged), for an answer of nothing.
func TestAnEmptyBodyUnderA200FailsOver(t *testing.T) {
	for _, c := range []struct {
		name string
		req  errorUnder200Request
		bad  string
	}{
		{"chat body", chatBodyOf("flaky"), "bad-openai"},
		{"chat stream answered with an empty JSON body", chatStreamOf("flaky"), "bad-openai"},
		{"chat body from Anthropic", chatBodyOf("claude-flaky"), "bad-anthropic"},
		{"chat body from Gemini", chatBodyOf("gemini-flaky"), "bad-gemini"},
		{"anthropic body", anthropicBody, "bad-anthropic"},
		{"gemini body", geminiBody, "bad-gemini"},
		{"responses body", responsesBody, "bad-openai"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := flakyStack(t, jsonOf(""), nil)
			status, body, id := st.send(t, c.req)
			if status != http.StatusOK || body == "" {
				t.Fatalf("client got %d %q, want the next deployment's answer", status, body)
			}
			served := st.sink.event(t, id)
			if served.Status != usage.StatusOK || served.Attempt != 2 || served.Deployment == c.bad {
				t.Fatalf("served %+v, want the fallback's second attempt", served)
			}
			for _, e := range st.sink.eventsOf(id) {
				if e.ID != id && (!e.NotCharged || e.Deployment != c.bad || e.Status != usage.StatusUpstreamError || e.Usage.Total() != 0) {
					t.Errorf("failed attempt %+v, want the operator's upstream_error, nothing billed", e)
				}
			}
			if status, _, _ := st.send(t, c.req); status != http.StatusOK {
				t.Fatalf("second request: %d", status)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("the upstream answering empty bodies got %d requests, want 1 (then resting)", n)
			}
		})
	}
}
