package gateway_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStopCutsOffPastAClientThatStoppedReading: a client that stopped
// reading its stream (its write to the client blocked) does not hold a
// shutdown: when the grace period ends, the other streams are cut off at
// once (their error event), and Stop returns within the grace period and
// shutdown_drain, not write_timeout later. A review saw `tollgate serve`
// take 57 s to stop, with TOLLGATE_SHUTDOWN_GRACE 2s, behind one such
// client: the cut-off waited for its blocked write while holding every
// other stream's, past docker's stop_grace_period of 45 s, after which the
// streams would all end crashed.
func TestStopCutsOffPastAClientThatStoppedReading(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) {
		c.ShutdownDrain = 300 * time.Millisecond
		c.WriteTimeout = 20 * time.Second
	})
	body := `{"model":"sim-small","stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(st.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := conn.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testKey +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing: the gateway's writes fill the buffers and block.
	long := st.post(t, "/v1/chat/completions",
		`{"model":"sim-small","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"200"}}`)
	defer long.Body.Close()
	ls := lines(long.Body)
	until(t, ls, `"content":"tok `)
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	stopped := make(chan struct{})
	go func() { _ = st.gw.Stop(ctx); close(stopped) }()
	until(t, ls, `"code":"server_shutdown"`)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the other stream was cut off %v after the stop began (grace 400ms)", took)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second): // half write_timeout (the race detector slows the relay of 100,000 tokens)
		t.Fatal("Stop still waits 10 s after the grace period ended, behind a client that stopped reading")
	}
	e := st.sink.event(t, long.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusCutOff {
		t.Fatalf("event %+v, want cut_off", e)
	}
}
