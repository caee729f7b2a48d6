package gateway_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientThatStopsReadingIsNotAStall: with a stall_timeout shorter
// than write_timeout, a client that stops reading holds the relay in a
// write to it, and the upstream is not read meanwhile: its silence is the
// client's doing. The event must be the client's (client_cancelled, the
// write_timeout named), with the upstream's own usage read on for after
// the client was taken as gone. It was recorded as the upstream's stall
// (timeout, usage estimated from what reached the client: 10,702 of the
// 1,000,000 tokens the upstream produced and billed), and the deployment
// was rested as failed: any client could rest any deployment, and pay for
// a fraction of what it asked for.
func TestClientThatStopsReadingIsNotAStall(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) {
		c.WriteTimeout = 2 * time.Second
		for i := range c.Providers {
			if c.Providers[i].Name == "sim" {
				c.Providers[i].StallTimeout = 300 * time.Millisecond
			}
		}
	})
	before := st.simStats(t)
	const n = 100000
	body := fmt.Sprintf(`{"model":"sim-small","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_chunks":"%d"}}`, n, n)
	conn := postUnread(t, st, body)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("response %v: %v", resp, err)
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	billed := st.simStats(t).Usage()
	billed.CompletionTokens -= before.Usage().CompletionTokens
	if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceUpstream || !strings.Contains(e.Error, "write_timeout") ||
		e.Usage.CompletionTokens != n || e.Usage.CompletionTokens != billed.CompletionTokens {
		t.Fatalf("a client that stopped reading was recorded as %s (%q), usage %s %+v; the simulator billed %d completion tokens",
			e.Status, e.Error, e.UsageSource, e.Usage, billed.CompletionTokens)
	}
}
