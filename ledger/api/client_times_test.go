package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientSendsBoundsWhole: the client sends a range's bounds to the
// nanosecond, so that its usage holds the requests of [from, to) as given:
// a request 300 ms into a second is outside a range from 500 ms into it,
// and one at 100 ms outside a range to 50 ms. (Mutation audit survivor:
// the bounds sent to the second widened the range.)
func TestClientSendsBoundsWhole(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), context.Background()
	a, key, _ := s.customer(`{"name":"a"}`)
	second := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	u := usage.Tokens{PromptTokens: 1}
	s.write(event(a, key, "m", second.Add(300*time.Millisecond), u), // before from
		event(a, key, "m", second.Add(2*time.Second), u),
		event(a, key, "m", second.Add(5*time.Second+100*time.Millisecond), u)) // after to
	rows, err := c.UsageAll(ctx, ledger.UsageQuery{CustomerID: a, From: second.Add(500 * time.Millisecond),
		To: second.Add(5*time.Second + 50*time.Millisecond)})
	noErr(t, "UsageAll", err)
	if len(rows) != 1 || rows[0].Requests != 1 {
		t.Errorf("usage of [10:30:00.5, 10:30:05.05) = %+v, want the one request of 10:30:02", rows)
	}
}
