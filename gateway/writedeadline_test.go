package gateway_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientThatStopsReading: a client that sends a streaming request and
// then reads nothing more (the attack: hold the relay, and so the usage
// event, for as long as the connection stays open) is taken as gone once a
// write to it has waited WriteTimeout: the upstream is read on to its end,
// the event holds every token the simulator billed as client_cancelled,
// and the gateway closes the connection. The client's receive buffer is
// small and the response (100,000 chunks, about 18 MB) far larger than
// what the kernel buffers.
func TestClientThatStopsReading(t *testing.T) {
	for _, tc := range []struct {
		name        string
		readHeaders bool // the client reads the response's header, then stops
	}{{"reads the header, then nothing", true}, {"reads nothing", false}} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, func(c *gateway.Config) { c.WriteTimeout = 300 * time.Millisecond })
			before := st.simStats(t)
			open := gateway.ClientConnections(st.gw)
			const n = 100000
			body := fmt.Sprintf(`{"model":"sim-small","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_chunks":"%d"}}`, n, n)
			conn := postUnread(t, st, body)

			var id string
			if tc.readHeaders {
				resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("response %v: %v", resp, err)
				}
				id = resp.Header.Get("X-Request-Id")
				if id == "" {
					t.Fatal("no X-Request-Id")
				}
			}
			// Read nothing more: the event must come anyway.
			var e usage.Event
			if id != "" {
				e = st.sink.event(t, id)
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for st.sink.count() == 0 {
					if time.Now().After(deadline) {
						t.Fatal("no event while the client read nothing")
					}
					time.Sleep(5 * time.Millisecond)
				}
				st.sink.mu.Lock()
				e = st.sink.events[0]
				st.sink.mu.Unlock()
			}
			billed := st.simStats(t).Usage()
			billed.CompletionTokens -= before.Usage().CompletionTokens
			billed.PromptTokens -= before.Usage().PromptTokens
			if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceUpstream || !strings.Contains(e.Error, "write_timeout (300ms)") ||
				e.Usage.CompletionTokens != n || e.Usage.CompletionTokens != billed.CompletionTokens || e.Usage.PromptTokens != billed.PromptTokens {
				t.Fatalf("event %+v; the simulator billed %+v", e, billed)
			}

			// The gateway closed the connection (a CI run, 2026-12-05,
			// once read no end of it within 10 s: whether the gateway kept
			// it or the kernel was slow to hand over what it held for the
			// client, the test could not tell, so it asks the gateway).
			for deadline := time.Now().Add(10 * time.Second); gateway.ClientConnections(st.gw) > open; {
				if time.Now().After(deadline) {
					t.Fatalf("the gateway kept the connection of a client that stopped reading open: %s", socketStates(conn))
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The client sees the end: what the kernel holds drains, then
			// the read ends (not by the test's deadline).
			_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, err := io.Copy(io.Discard, conn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the gateway closed the connection, yet the client read no end of it in 60 s: %s", socketStates(conn))
			}
			if !strings.Contains(fmt.Sprint(err), "reset") && err != nil {
				t.Fatalf("reading the rest: %v", err)
			}
		})
	}
}

// TestClientThatStopsReadingLater: the same once the stream has left
// net/http (see takeover): the client reads the stream's first events,
// the upstream pauses past takeAfter, then sends 20 MB of events and its
// usage, and the client reads nothing more. The event holds the upstream's
// usage as client_cancelled, and the connection is closed.
func TestClientThatStopsReadingLater(t *testing.T) {
	const chunks = 120000
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok tok tok tok tok tok tok tok tok tok tok tok tok tok tok tok "},"finish_reason":null}]}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, chunk)
		w.(http.Flusher).Flush()
		time.Sleep(time.Second) // past takeAfter: the gateway takes the connection
		bw := bufio.NewWriterSize(w, 64<<10)
		for range chunks {
			if _, err := bw.WriteString(chunk); err != nil {
				return
			}
		}
		fmt.Fprintf(bw, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n",
			16*(chunks+1), 16*(chunks+1)+7)
		_ = bw.Flush()
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.WriteTimeout = 300 * time.Millisecond
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "flood", Type: "openai", BaseURL: up.URL})
	})
	open := gateway.ClientConnections(st.gw)
	conn := postUnread(t, st, `{"model":"flood/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	br := bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("response %v: %v", resp, err)
	}
	id := resp.Header.Get("X-Request-Id")
	// Read the first event, then wait out the takeover: read nothing more.
	if _, err := br.ReadString('}'); err != nil {
		t.Fatal(err)
	}
	// takeAfter is 100 ms; on a loaded machine the takeover may come
	// later (a run beside CI, 2026-12-04: not yet at 200 ms), so wait for it while the
	// upstream pauses.
	for deadline := time.Now().Add(800 * time.Millisecond); gateway.TakenStreams(st.gw) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if taken := gateway.TakenStreams(st.gw); taken != 1 {
		t.Fatalf("%d streams took their connections, want this one", taken)
	}

	e := st.sink.event(t, id)
	if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceUpstream || !strings.Contains(e.Error, "write_timeout") ||
		e.Usage.CompletionTokens != 16*(chunks+1) || e.Usage.PromptTokens != 7 {
		t.Fatalf("event %+v", e)
	}
	// The gateway closed the connection (see TestClientThatStopsReading),
	// and the client reads its end.
	for deadline := time.Now().Add(10 * time.Second); gateway.ClientConnections(st.gw) > open; {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway kept the connection of a client that stopped reading open: %s", socketStates(conn))
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, err = io.Copy(io.Discard, br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the gateway closed the connection, yet the client read no end of it in 60 s: %s", socketStates(conn))
	}
}

// postUnread sends body to /v1/chat/completions over a connection of its
// own whose receive buffer is 4 KiB, and returns the connection (closed
// when the test ends), from which nothing has been read.
func postUnread(t *testing.T, st *stack, body string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", st.gw.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		testKey, len(body), body)
	return conn
}

// socketStates is what ss says of both ends of conn, for a failure's
// message (the state, the queues, the timers).
func socketStates(conn net.Conn) string {
	port := conn.LocalAddr().(*net.TCPAddr).Port
	out, err := exec.Command("ss", "-tnoi", "state", "all", fmt.Sprintf("( sport = :%d or dport = :%d )", port, port)).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(ss: %v)", err)
	}
	return "\n" + string(out)
}

// TestClientThatStopsReadingDrainBounded: a client that stops reading
// before its stream leaves net/http, while the upstream goes on sending
// without end, is taken as gone as after a disconnect: the upstream is
// read on for DrainTimeout, then cut off, and the event is recorded.
//
// The test watches the drain from the upstream's side, not by how much the
// gateway reads in it: it asserted all of a 20 MB burst read within the
// 1 s drain, which the race detector's slower relay does not do (it failed
// under -race). While the gateway waits on its write to the client, it
// reads nothing from the upstream, whose writes stall once the sockets
// between are full; the drain begins when that stall ends, the gateway
// reading again, and ends when the upstream's request is cut. That span is
// DrainTimeout, within the scheduling's slack: a drain that cut the
// upstream at once, lasted longer, or had no end fails it. The event bills
// no more than the upstream sent, and at least what it sent once the drain
// began (the sockets were full when the stall ended: each byte it sent
// after was one the gateway read). Each chunk carries one token of content
// and padding the estimate does not count, so that estimating what the
// drain read (the upstream reports no usage) stays quick under -race.
func TestClientThatStopsReadingDrainBounded(t *testing.T) {
	const writeTimeout, drainTimeout = time.Second, time.Second
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}],"pad":"` +
		strings.Repeat("x", 600) + `"}` + "\n\n"
	burst := []byte(strings.Repeat(chunk, 30000)) // 20 MB at once: the client's connection fills
	var (
		stall, stallEnd, end time.Time // the upstream's longest write: its length (from the zero time) and its end; its request's end
		sent, sentAtStallEnd int64     // bytes the upstream sent, in all and when its longest write ended
	)
	upDone, stop := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := func(b []byte) bool {
			began := time.Now()
			n, err := w.Write(b)
			if err == nil {
				w.(http.Flusher).Flush()
			}
			sent += int64(n)
			if took := time.Since(began); took > stall.Sub(time.Time{}) { // a write the cut ended too
				stall, stallEnd, sentAtStallEnd = time.Time{}.Add(took), time.Now(), sent
			}
			return err == nil
		}
		defer close(upDone)
		defer func() { end = time.Now() }()
		w.Header().Set("Content-Type", "text/event-stream")
		for b := burst; len(b) > 0; b = b[min(len(b), 64<<10):] {
			if !write(b[:min(len(b), 64<<10)]) {
				return
			}
		}
		for { // then a chunk every 50 ms, without end (until the test's)
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if !write([]byte(chunk)) {
				return
			}
		}
	}))
	defer up.Close()
	defer close(stop) // before up.Close, which waits for the handler: a drain without end would hold it
	st := newStack(t, func(c *gateway.Config) {
		c.WriteTimeout = writeTimeout
		c.DrainTimeout = drainTimeout
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "endless", Type: "openai", BaseURL: up.URL})
	})
	conn := postUnread(t, st, `{"model":"endless/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("response %v: %v", resp, err)
	}
	select {
	case <-upDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream is still being read 20 s on: the drain was not bounded")
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusClientCancelled || !strings.Contains(e.Error, "write_timeout") {
		t.Fatalf("event %+v", e)
	}
	per := int64(len(chunk))
	maxTokens := (sent + per - 1) / per // a chunk begun counts whole
	minTokens := (sent - sentAtStallEnd) / per
	drained := end.Sub(stallEnd)
	t.Logf("upstream stalled %s; drained %s after; sent %d chunks, %d of them after the stall; billed %d completion tokens",
		stall.Sub(time.Time{}), drained, sent/per, (sent-sentAtStallEnd)/per, e.Usage.CompletionTokens)
	if stall.Sub(time.Time{}) < writeTimeout/2 {
		t.Fatalf("the upstream's longest write took %s: the gateway never stopped reading it for its client's write_timeout (%s)",
			stall.Sub(time.Time{}), writeTimeout)
	}
	if drained < drainTimeout-150*time.Millisecond || drained > drainTimeout+1500*time.Millisecond {
		t.Errorf("the upstream was read on for %s once the client was taken as gone; want drain_timeout (%s)", drained, drainTimeout)
	}
	if c := e.Usage.CompletionTokens; c > maxTokens+1 || c < minTokens { // +1: the estimate of the text may round up
		t.Errorf("billed %d completion tokens; the upstream sent %d chunks of one token in all, %d of them in the drain", c, maxTokens, minTokens)
	}
}
