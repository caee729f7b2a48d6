package gateway_test

import (
	"io"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestRestingDeploymentsGetOneCallARequest: when every deployment of a
// model and its fallbacks rests (each answered 503 with Retry-After), a
// request still reaches an upstream (refused by an upstream, never by the
// gateway's guess), but only the one whose rest ends soonest: it made
// max_attempts calls, one to each resting deployment, tripling the load on
// providers that had asked for a pause (stop 74's failover review: 10
// client requests, 30 upstream calls within a second).
func TestRestingDeploymentsGetOneCallARequest(t *testing.T) {
	st := failoverStack(t, func(c *gateway.Config) { c.Retry.MaxAttempts = 3; c.Retry.Cooldown = time.Millisecond })
	for _, d := range []string{"east", "west", "spare"} {
		st.setFaults(t, d, `{"fail_next":1000,"status":503,"retry_after":"60"}`)
	}
	send := func() int {
		resp := st.post(t, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"x"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	calls := func() int64 {
		var n int64
		for _, d := range st.simStats(t).ByDeployment {
			n += d.Requests.Total
		}
		return n
	}
	// The first request finds all three ready: three attempts, each
	// refused, each deployment resting for a minute after it.
	if code := send(); code < 500 {
		t.Fatalf("first request: %d, want the upstreams' 5xx", code)
	}
	if n := calls(); n != 3 {
		t.Fatalf("first request made %d upstream calls, want 3 (max_attempts, all ready)", n)
	}
	const requests = 10
	for range requests {
		if code := send(); code < 500 {
			t.Fatalf("while all rest: %d, want the upstream's 5xx", code)
		}
	}
	if n := calls() - 3; n != requests {
		t.Fatalf("%d requests while every deployment rests made %d upstream calls, want %d (one each)", requests, n, requests)
	}
}
