package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// rawChat is an HTTP/1.1 chat completion request as a client writes it,
// with extra header lines.
func rawChat(stream bool, maxTokens int, delayMs int, extra ...string) string {
	body := fmt.Sprintf(`{"model":"sim-small","stream":%t,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"%d"}}`,
		stream, maxTokens, delayMs)
	h := "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer " + testKey +
		"\r\nContent-Type: application/json\r\n"
	for _, l := range extra {
		h += l + "\r\n"
	}
	return h + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

// dialSend opens a connection to st's gateway, closed at the test's end,
// and sends raw on it.
func dialSend(t *testing.T, st *stack, raw string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", st.gw.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// readStream reads one response from br, whole (its chunked body checked by
// net/http), and returns it with its body.
func readStream(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body: %v (read %q)", err, b)
	}
	return resp, string(b)
}

// TestTakenStreamKeepsItsConnection: a stream that lasts takes its
// connection from net/http and gives it back at its end, so the client's
// next requests, streamed or not, go on the same connection; every body is
// whole (its chunks and its end as net/http's client reads them) and every
// event is recorded. A stream over within 100 ms keeps net/http's.
func TestTakenStreamKeepsItsConnection(t *testing.T) {
	bothWatchers(t, testTakenStreamKeepsItsConnection)
}

func testTakenStreamKeepsItsConnection(t *testing.T) {
	st := newStack(t, nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	var addrs []string
	var reused []bool
	for i, r := range []struct {
		stream  bool
		delayMs int
	}{{true, 60}, {false, 0}, {true, 0}, {true, 60}} {
		body := fmt.Sprintf(`{"model":"sim-small","stream":%t,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"%d"}}`,
			r.stream, 3+i, r.delayMs)
		trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			addrs, reused = append(addrs, ci.Conn.LocalAddr().String()), append(reused, ci.Reused)
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			http.MethodPost, st.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %v %q", i, resp.StatusCode, err, b)
		}
		if r.stream && !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
			t.Fatalf("request %d: the stream does not end with [DONE]: %q", i, b)
		}
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusOK || e.Usage.CompletionTokens != int64(3+i) {
			t.Fatalf("request %d: event %+v", i, e)
		}
	}
	for i := 1; i < len(addrs); i++ {
		if addrs[i] != addrs[0] || !reused[i] {
			t.Fatalf("connections %v, reused %v: want one connection for every request", addrs, reused)
		}
	}
	if n := gateway.TakenStreams(st.gw); n != 2 {
		t.Fatalf("%d streams took their connections, want the 2 that lasted", n)
	}
	checkWatcher(t, st.gw)
}

// TestTakenStreamPipelined: requests a client sends before the stream
// before them has ended (with it, and while it streams) are answered in
// order on the same connection.
func TestTakenStreamPipelined(t *testing.T) { bothWatchers(t, testTakenStreamPipelined) }

func testTakenStreamPipelined(t *testing.T) {
	st := newStack(t, nil)
	// Two sent together, the second in net/http's buffer when the first
	// stream takes the connection.
	conn, br := dialSend(t, st, rawChat(true, 3, 60)+rawChat(true, 4, 60))
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	for i := range 2 {
		resp, body := readStream(t, br)
		if resp.StatusCode != http.StatusOK || !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// A third, streamed slowly, and a fourth sent while it streams: the
	// fourth's first byte is read by the third's watcher, and kept for
	// the server.
	if _, err := io.WriteString(conn, rawChat(true, 3, 100)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 16)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	waitTaken(t, st.gw, 3)
	if _, err := io.WriteString(conn, rawChat(false, 2, 0)); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
		t.Fatalf("third: %v %q", err, b)
	}
	resp, body := readStream(t, br)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"chat.completion"`) {
		t.Fatalf("fourth: %d %q", resp.StatusCode, body)
	}
	if got := st.sink.count(); got != 4 {
		t.Fatalf("%d events, want 4", got)
	}
}

// TestTakenStreamClientHangUp: a client that hangs up on a taken stream
// while its upstream is silent is seen at once (not at the upstream's next
// event): its event is recorded client_cancelled within drain_timeout.
func TestTakenStreamClientHangUp(t *testing.T) { bothWatchers(t, testTakenStreamClientHangUp) }

func testTakenStreamClientHangUp(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) { c.DrainTimeout = 200 * time.Millisecond })
	conn, br := dialSend(t, st, rawChat(true, 3, 8000)) // 8 s before each content chunk
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 16)); err != nil { // the stream's first event
		t.Fatal(err)
	}
	waitTaken(t, st.gw, 1)
	hungUp := time.Now()
	conn.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if took := time.Since(hungUp); took > 4*time.Second {
		t.Fatalf("the event came %v after the hang-up: the hang-up was not seen", took)
	}
	if e.Status != usage.StatusClientCancelled {
		t.Fatalf("event %+v, want client_cancelled", e)
	}
}

// waitTaken waits until n streams of gw took their connections, and checks
// which watcher watches them.
func waitTaken(t *testing.T, gw *gateway.Server, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); gateway.TakenStreams(gw) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams took their connections, want %d", gateway.TakenStreams(gw), n)
		}
	}
	checkWatcher(t, gw)
}

// polling is what bothWatchers set for the test running.
var polling = true

// bothWatchers runs f with taken connections watched by the epoll poller,
// then by a goroutine each.
func bothWatchers(t *testing.T, f func(t *testing.T)) {
	for _, poll := range []bool{true, false} {
		name := map[bool]string{true: "poller", false: "goroutine"}[poll]
		t.Run(name, func(t *testing.T) {
			was := gateway.PollHangups(poll)
			polling = poll
			t.Cleanup(func() { gateway.PollHangups(was); polling = true })
			f(t)
		})
	}
}

// checkWatcher fails unless gw's taken streams were watched as polling
// says.
func checkWatcher(t *testing.T, gw *gateway.Server) {
	t.Helper()
	// A stream counts as taken before the poller is given its
	// connection: wait for that, a moment later (a busy machine may
	// run other goroutines between the two).
	for deadline := time.Now().Add(5 * time.Second); polling && gateway.PolledStreams(gw) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	taken, polled := gateway.TakenStreams(gw), gateway.PolledStreams(gw)
	if polling && polled == 0 || !polling && polled != 0 {
		t.Fatalf("%d streams taken, %d watched by the poller; polling %v", taken, polled, polling)
	}
}

// readEOF reads conn until it ends, and fails unless the server closed it
// within d.
func readEOF(t *testing.T, r io.Reader, conn net.Conn, d time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	if b, err := io.ReadAll(r); err != nil || len(b) > 0 {
		t.Fatalf("read %q, %v; want the server to close the connection within %v", b, err, d)
	}
}

// TestTakenStreamConnectionClose: a client that asked for its connection
// to close has it closed after the stream's end.
func TestTakenStreamConnectionClose(t *testing.T) { bothWatchers(t, testTakenStreamConnectionClose) }

func testTakenStreamConnectionClose(t *testing.T) {
	st := newStack(t, nil)
	conn, br := dialSend(t, st, rawChat(true, 3, 60, "Connection: close"))
	if resp, body := readStream(t, br); !strings.HasSuffix(body, "data: [DONE]\n\n") || !resp.Close {
		t.Fatalf("%v %q", resp.Header, body)
	}
	readEOF(t, br, conn, 3*time.Second)
	if gateway.TakenStreams(st.gw) != 1 {
		t.Fatal("the stream did not take its connection")
	}
	checkWatcher(t, st.gw)
}

// TestTakenConnectionIdleTimeout: a connection a stream took, idle after
// it, closes after idle_timeout, as net/http closes its own.
func TestTakenConnectionIdleTimeout(t *testing.T) { bothWatchers(t, testTakenConnectionIdleTimeout) }

func testTakenConnectionIdleTimeout(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) { c.IdleTimeout = 300 * time.Millisecond })
	conn, br := dialSend(t, st, rawChat(true, 3, 60))
	readStream(t, br)
	idle := time.Now()
	readEOF(t, br, conn, 5*time.Second)
	if took := time.Since(idle); took < 250*time.Millisecond {
		t.Fatalf("closed after %v idle, before idle_timeout", took)
	}
	waitTaken(t, st.gw, 1)
}

// TestStopWaitsForTakenStreams: Stop lets a stream that took its
// connection finish within the grace period, its body whole, and closes
// the connection after; a connection idle after its stream closes at once.
func TestStopWaitsForTakenStreams(t *testing.T) { bothWatchers(t, testStopWaitsForTakenStreams) }

func testStopWaitsForTakenStreams(t *testing.T) {
	st := newStack(t, nil)
	idle, idleBr := dialSend(t, st, rawChat(true, 2, 60))
	readStream(t, idleBr)

	conn, br := dialSend(t, st, rawChat(true, 6, 80))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	waitTaken(t, st.gw, 2)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- st.gw.Stop(ctx)
	}()
	readEOF(t, idleBr, idle, 2*time.Second)
	b, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream during Stop: %v %q", err, b)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop = %v, want nil: the stream ended within the grace period", err)
	}
	readEOF(t, br, conn, 2*time.Second)
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusOK || e.Usage.CompletionTokens != 6 {
		t.Fatalf("event %+v", e)
	}
}

// TestTakenStreamBroken: a native stream whose upstream breaks after its
// connection was taken ends broken for the client (no end of the chunked
// body, the connection closed), as net/http aborts a handler, and its
// event records the upstream's failure.
func TestTakenStreamBroken(t *testing.T) { bothWatchers(t, testTakenStreamBroken) }

func testTakenStreamBroken(t *testing.T) {
	st := newStack(t, nil)
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":6,"stream":true,`+
		`"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"sim_delay_ms=60;sim_fault=disconnect_after:4"}}`)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("the body ended whole: %q", b)
	}
	if gateway.TakenStreams(st.gw) != 1 {
		t.Fatal("the stream did not take its connection")
	}
	checkWatcher(t, st.gw)
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusUpstreamError {
		t.Fatalf("event %+v, want upstream_error", e)
	}
}

// TestTakenMidBurst: a stream taken while events it has written wait for
// their flush (its upstream sends faster than the relay flushes) loses
// none of them: every content chunk reaches the client, once. The
// upstream sends for twice takeAfter, however fast the machine, so the
// takeover falls in the burst.
func TestTakenMidBurst(t *testing.T) { bothWatchers(t, testTakenMidBurst) }

func testTakenMidBurst(t *testing.T) {
	const chunk = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n"
	var sent atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 16<<10)
		for until := time.Now().Add(2 * gateway.TakeAfter); time.Now().Before(until); {
			for range 64 {
				if _, err := bw.WriteString(chunk); err != nil {
					return
				}
				sent.Add(1)
			}
		}
		fmt.Fprintf(bw, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n",
			sent.Load(), sent.Load()+7)
		_ = bw.Flush()
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "flood", Type: "openai", BaseURL: up.URL})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"flood/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if gateway.TakenStreams(st.gw) != 1 {
		t.Fatalf("the stream did not take its connection")
	}
	checkWatcher(t, st.gw)
	if n := int64(bytes.Count(b, []byte(`"content":"tok "`))); n != sent.Load() || n == 0 {
		t.Fatalf("%d content chunks reached the client, want the %d sent", n, sent.Load())
	}
}

// TestTakenConnectionsNextRequestHasItsWholeReadTimeout: net/http reckons
// a request's deadlines from when it began reading the connection, which
// for a connection a stream took and gave back is the hand-back. A client
// that stays idle longer than read_timeout (within idle_timeout) and then
// sends a request whose body does not arrive with its header still gets
// the whole read_timeout for it, as on a connection never taken.
func TestTakenConnectionsNextRequestHasItsWholeReadTimeout(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) {
		c.ReadTimeout = time.Second
		c.IdleTimeout = 30 * time.Second
	})
	conn, br := dialSend(t, st, rawChat(true, 3, 60)) // lasts past takeAfter: taken
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	resp, body := readStream(t, br)
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream: %d %q", resp.StatusCode, body)
	}
	waitTaken(t, st.gw, 1)
	time.Sleep(1500 * time.Millisecond) // idle: longer than read_timeout, far less than idle_timeout

	msg := strings.Repeat("lorem ipsum ", 2000) // a 24 KB history: the body comes after the header
	b := `{"model":"sim-small","max_tokens":2,"messages":[{"role":"user","content":"` + msg + `"}]}`
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer " + testKey +
		"\r\nContent-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(b))
	if _, err := io.WriteString(conn, head+b); err != nil {
		t.Fatal(err)
	}
	resp, got := readStream(t, br)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request sent 1.5s after a taken stream, on a connection kept alive: %d %s", resp.StatusCode, got)
	}
}
