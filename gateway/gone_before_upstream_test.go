package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientGoneBeforeAcceptIsNotSentUpstream: a client that sent its
// request and hung up while its connection waited for a slot (the gateway
// at its connection cap; a review's curl -Z --parallel-max 500 against a
// gateway capped at 64 by `ulimit -n 1024`, with curl's --max-time 20)
// could not receive any answer, yet the gateway read the request from the
// socket once a slot freed, called the upstream and billed the whole
// completion: every one of 472 such requests, 466 as client_cancelled and
// 6 non-streamed ones as ok, although no client saw a status line. Its
// hang-up is in the socket before the upstream is asked: the upstream is
// not asked, and the event bills nothing.
func TestClientGoneBeforeAcceptIsNotSentUpstream(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) { c.MaxConnections = 1 })
	for _, stream := range []bool{false, true} {
		user := fmt.Sprintf("gone-before-accept-%v", stream)
		before := st.simStats(t).Requests.Total

		// The one slot is held by a stream, for about a second.
		held := st.post(t, "/v1/chat/completions",
			`{"model":"sim-small","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"100"}}`)
		if held.StatusCode != 200 {
			t.Fatalf("holding stream: status %d", held.StatusCode)
		}
		br := bufio.NewReader(held.Body)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}

		// A client sends its request and leaves while it waits for a slot.
		body := fmt.Sprintf(`{"model":"sim-pro","stream":%v,"max_tokens":24,"user":%q,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`, stream, user)
		c, err := net.Dial("tcp", st.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + testKey +
			"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		_ = c.Close()

		// The stream ends, its connection closes: the slot goes to the
		// client that left.
		rest := new(strings.Builder)
		_, _ = bufio.NewReader(br).WriteTo(rest)
		held.Body.Close()

		e := st.sink.eventWhere(t, user, func(e *usage.Event) bool { return e.EndUser == user })
		if e.Usage != (usage.Tokens{}) || e.Status != usage.StatusClientCancelled {
			t.Errorf("stream %v: a client gone before its request was accepted: event %s, usage %+v (%s), error %q; want client_cancelled, nothing billed",
				stream, e.Status, e.Usage, e.UsageSource, e.Error)
		}
		// The holding stream went upstream; the request of the client gone did not.
		if got := st.simStats(t).Requests.Total - before; got != 1 {
			t.Errorf("stream %v: the upstream was asked %d times, want 1 (the holding stream's)", stream, got)
		}
	}
}
