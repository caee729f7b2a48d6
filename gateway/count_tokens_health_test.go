package gateway_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestTokenCountingSuccessEndsTheRunOfFailures: a count the deployment
// serves ends its run of failures, as a request's success does, so that
// its next failure rests it for retry.cooldown again, not twice as long.
// Only the failures were recorded: a deployment that only counts reached
// kept its run, and each failure, however far apart, doubled its rest.
func TestTokenCountingSuccessEndsTheRunOfFailures(t *testing.T) {
	const cooldown = 300 * time.Millisecond
	st, hits := countStackOn(t, false, func(w http.ResponseWriter, _ *http.Request, n int64) {
		w.Header().Set("Content-Type", "application/json")
		if n == 2 { // served between two failures
			_, _ = io.WriteString(w, `{"input_tokens":5}`)
			return
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, anthropicRateLimited)
	}, func(c *gateway.Config) { c.Retry.Cooldown, c.Retry.MaxCooldown = cooldown, time.Hour })
	count := func(want int64) {
		t.Helper()
		if code, body, _ := st.send(t, anthropicCount); code != http.StatusOK {
			t.Fatalf("count: %d %s", code, body)
		}
		if n := hits.Load(); n != want {
			t.Fatalf("the deployment got %d counts, want %d", n, want)
		}
	}
	count(1) // fails over to the fallback; the deployment rests a cooldown
	time.Sleep(cooldown + 100*time.Millisecond)
	count(2) // served by the deployment: its run of failures is over
	count(3) // fails again: the first of a new run, a cooldown's rest
	time.Sleep(cooldown + 100*time.Millisecond)
	count(4) // the rest is over (twice the cooldown had the run gone on)
}
