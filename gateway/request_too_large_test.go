package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// requestTooLarge is OpenAI's answer to a request whose own tokens pass
// the organization's tokens-per-minute limit: a 429 that no wait cures
// ("The input or output tokens must be reduced in order to run
// successfully"), drawn by the client's prompt, not by the deployment's
// load.
var requestTooLarge = jsonOf(`{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): ` +
	`Limit 30000, Requested 36278. The input or output tokens must be reduced in order to run successfully. ` +
	`Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)

// TestARequestTooLargeRestsNothing: OpenAI's 429 "Request too large"
// is the client's request passing the deployment's per-minute limit on
// its own. Another deployment (a larger limit) may take it, so it fails
// over, but the deployment does not rest: taken as the deployment's
// failure, any client sending a prompt above the limit, once a cool-down,
// rested every deployment of a model for every other customer, their
// requests going to the fallbacks (found by review).
func TestARequestTooLargeRestsNothing(t *testing.T) {
	st, hits := refusingStack(t, http.StatusTooManyRequests, requestTooLarge, nil)
	for i := range 2 {
		code, body, id := st.send(t, chatBodyOf("flaky"))
		if code != http.StatusOK {
			t.Fatalf("request %d: client got %d %s, want the next deployment's answer", i, code, body)
		}
		served := st.sink.event(t, id)
		if served.Attempt != 2 || served.Deployment == "bad-openai" || served.Status != usage.StatusOK {
			t.Fatalf("request %d: served %+v, want the fallback's second attempt", i, served)
		}
		for _, e := range st.sink.eventsOf(id) {
			if e.ID != id && (!e.NotCharged || e.Deployment != "bad-openai" || e.Usage.Total() != 0) {
				t.Errorf("request %d: failed attempt %+v, want the operator's, nothing billed", i, e)
			}
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the deployment got %d requests, want 2: a request too large for it rests nothing", n)
	}

	// On the last attempt the client gets the 429 as it came, and the
	// deployment still does not rest.
	st, hits = refusingStack(t, http.StatusTooManyRequests, requestTooLarge, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
	for i := range 2 {
		code, body, _ := st.send(t, chatBodyOf("flaky"))
		if code != http.StatusTooManyRequests || !strings.Contains(body, "Request too large") {
			t.Fatalf("request %d: client got %d %s, want the upstream's 429 as it came", i, code, body)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the deployment got %d requests, want 2: a request too large for it rests nothing", n)
	}
}
