package gateway_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestA408FailsOver: a deployment that answers 408 Request Timeout
// fails as on a 429 or a 5xx, which the OpenAI and Anthropic SDKs retry
// alike; the gateway relayed it to the client, with no other deployment
// tried and none resting, so every request drawn to a deployment timing
// out behind its load balancer got its 408.
func TestA408FailsOver(t *testing.T) {
	for _, status := range []int{http.StatusRequestTimeout} {
		answer := jsonOf(`{"error":{"message":"Request timed out, or conflicted.","type":"server_error","param":null,"code":null}}`)
		for _, c := range []struct {
			name string
			req  errorUnder200Request
			bad  string
		}{
			{"chat body", chatBodyOf("flaky"), "bad-openai"},
			{"chat stream", chatStreamOf("flaky"), "bad-openai"},
			{"anthropic body", anthropicBody, "bad-anthropic"},
		} {
			t.Run(strconv.Itoa(status)+" "+c.name, func(t *testing.T) {
				st, hits := refusingStack(t, status, answer, nil)
				code, body, id := st.send(t, c.req)
				if code != http.StatusOK || strings.Contains(body, "timed out") {
					t.Fatalf("client got %d %s, want the next deployment's answer", code, body)
				}
				wantFailedOver(t, st, c.req, id, c.bad, hits, func(e string) bool { return e == "upstream status "+strconv.Itoa(status) })
			})
		}
		// On the last attempt the client gets the status as it came, and
		// the deployment still rests.
		t.Run(strconv.Itoa(status)+" last attempt", func(t *testing.T) {
			st, hits := refusingStack(t, status, answer, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			code, body, id := st.send(t, chatBodyOf("flaky"))
			if code != status || !strings.Contains(body, "timed out") {
				t.Fatalf("client got %d %s, want the upstream's %d as it came", code, body, status)
			}
			if e := st.sink.event(t, id); e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 {
				t.Fatalf("event %+v", e)
			}
			wantRested(t, st, chatBodyOf("flaky"), "bad-openai", hits)
		})
	}
}

// TestA409IsTheClients: a 409 Conflict is relayed as it came, with no
// other deployment tried and the deployment not resting. The SDKs retry a
// 409, but what conflicts is the client's own (a conversation or response
// it named, busy with another of its requests): taken as the deployment's
// failure, as it was for a while, any client able to draw 409s (two
// requests at once on one conversation) could rest every deployment of a
// model, for every other customer (found by review).
func TestA409IsTheClients(t *testing.T) {
	answer := jsonOf(`{"error":{"message":"Another request is in progress for this conversation.","type":"invalid_request_error","param":null,"code":"conflict"}}`)
	st, hits := refusingStack(t, http.StatusConflict, answer, nil)
	for i := range 2 {
		code, body, id := st.send(t, chatBodyOf("flaky"))
		if code != http.StatusConflict || !strings.Contains(body, "in progress") {
			t.Fatalf("request %d: client got %d %s, want the upstream's 409 as it came", i, code, body)
		}
		if e := st.sink.event(t, id); e.Attempt != 1 || e.Deployment != "bad-openai" {
			t.Fatalf("request %d: %+v, want the first deployment's one attempt, no failover", i, e)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the deployment got %d requests, want 2: a 409 does not rest it", n)
	}
}
