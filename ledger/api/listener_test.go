package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestListenerStopLetsRequestsFinishAndWaits: Stop lets a request in
// flight finish, refuses new connections, and returns with no goroutine
// of the listener left; a second Stop, and Stop on a listener never
// started, return at once.
func TestListenerStopLetsRequestsFinishAndWaits(t *testing.T) {
	if err := api.NewListener(http.NotFoundHandler(), slog.New(slog.DiscardHandler)).Stop(context.Background()); err != nil {
		t.Fatalf("Stop on a listener never started: %v", err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	}), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + l.Addr() + "/slow")
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- l.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if b := <-got; b != "finished" {
		t.Fatalf("the request in flight got %q, want its whole answer", b)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	buf := make([]byte, 1<<20)
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "api.(*Listener).Start") {
			t.Fatalf("a goroutine the listener started outlived Stop:\n%s", g)
		}
	}
	if _, err := http.Get("http://" + l.Addr() + "/"); err == nil {
		t.Fatal("a stopped listener answered")
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// TestListenerStopCutsOffWhatOutlastsItsWait: a request still in flight
// when Stop's wait ends (an export a client reads slowly) has its context
// cancelled, and Stop returns nil: a cut-off is part of a shutdown. It
// returned the wait's deadline, and serve exited 1 for a routine SIGTERM
// (a crash review).
func TestListenerStopCutsOffWhatOutlastsItsWait(t *testing.T) {
	entered, cancelled := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		close(cancelled)
		time.Sleep(100 * time.Millisecond) // an export's last write, its connection's return
		returned.Store(true)
	}), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go func() {
		if resp, err := http.Get("http://" + l.Addr() + "/export"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := l.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v; want nil, the request cut off", err)
	}
	if !returned.Load() {
		t.Fatal("Stop returned before the handler it cut off: the database closes after it")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the request left in flight was not cancelled")
	}
}

// TestListenerRefusesBodiesOver1MiB: a request body over 1 MiB, the most
// any admin or console route reads, is refused with the API's invalid
// error before the handler runs, and before it is read when its
// Content-Length says so. The listener read 8 MiB ahead.
func TestListenerRefusesBodiesOver1MiB(t *testing.T) {
	var ran atomic.Bool
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Store(true) }), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(strings.Repeat("x", 1<<20+1))
		if chunked {
			body = io.MultiReader(body) // no length known: sent chunked
		}
		req, _ := http.NewRequest("POST", "http://"+l.Addr()+"/admin/v1/customers", body)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"invalid"`) || ran.Load() {
			t.Fatalf("chunked %v: status %d, body %s, handler ran %v; want 400 invalid before the handler", chunked, resp.StatusCode, b, ran.Load())
		}
	}
}

// stallBody opens a connection to addr and sends a POST with credentials
// (when auth) announcing a body of n bytes, then all of it but the last
// byte, then nothing: a slow client. Closing the returned connection ends
// it.
func stallBody(t *testing.T, addr string, n int, auth bool, payload []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := fmt.Sprintf("POST /admin/v1/customers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", n)
	if auth {
		h += "Authorization: Bearer wrong\r\n"
	}
	go func() {
		if _, err := io.WriteString(c, h+"\r\n"); err == nil {
			_, _ = c.Write(payload[:n-1])
		}
	}()
	return c
}

// heapAlloc is the live heap after a collection, in bytes.
func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestListenerBoundsBodiesHeldAtOnce: 40 clients sending 1 MiB bodies but
// their last byte, then stalling, grow the heap by the listener's bound
// (16 MiB), not by 40 MiB, with credentials or not; a request without a
// body is still answered meanwhile. A review took the admin process from
// 122 MB to 538 MB with 40 such clients of 8 MiB each.
func TestListenerBoundsBodiesHeldAtOnce(t *testing.T) {
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.Stop(ctx)
	})
	const n = 1 << 20
	payload := make([]byte, n) // shared by every client: the test's own memory does not grow with them
	for _, auth := range []bool{false, true} {
		base := heapAlloc()
		var conns []net.Conn
		for range 40 {
			conns = append(conns, stallBody(t, l.Addr(), n, auth, payload))
		}
		// Wait for the listener to have read what it will: the heap stops
		// growing.
		grown, last := int64(0), int64(-1)
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
			grown = heapAlloc() - base
			if grown == last {
				break
			}
			last = grown
		}
		if grown > 24<<20 {
			t.Errorf("credentials %v: 40 stalled 1 MiB bodies grew the heap by %d MiB; want at most the 16 MiB bound and some", auth, grown>>20)
		}
		status, b, err := send("GET", "http://"+l.Addr()+"/metrics", "", "")
		if err != nil || status != http.StatusOK || string(b) != "0" {
			t.Errorf("credentials %v: a GET beside the stalled bodies: %d %s %v; want 200", auth, status, b, err)
		}
		for _, c := range conns {
			c.Close()
		}
	}
}

// TestListenerAnswers503WhenNoRoomForABody: a body that finds no room
// among those held read ahead within its wait is answered 503 unavailable
// in the API's error shape; the bytes held never exceed the bound; once
// the stalled clients are gone their room is given back, and a whole body
// is read and served.
func TestListenerAnswers503WhenNoRoomForABody(t *testing.T) {
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}), slog.New(slog.DiscardHandler))
	api.SetListenerLimits(l, 10*time.Second, 2<<20, 300*time.Millisecond)
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	payload := make([]byte, 1<<20)
	var conns []net.Conn
	for range 2 {
		conns = append(conns, stallBody(t, l.Addr(), 1<<20, true, payload))
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if now, _ := api.BodiesHeld(l); now == 2<<20 {
			break
		} else if time.Now().After(end) {
			t.Fatalf("the stalled bodies hold %d bytes, want 2 MiB", now)
		}
	}
	status, b, err := send("POST", "http://"+l.Addr()+"/admin/v1/customers", "t", `{"name":"x"}`)
	var e apiError
	if err != nil || status != http.StatusServiceUnavailable || json.Unmarshal(b, &e) != nil || e.Error.Code != "unavailable" {
		t.Fatalf("a body with no room: %d %s %v; want 503 unavailable", status, b, err)
	}
	if _, peak := api.BodiesHeld(l); peak > 2<<20 {
		t.Fatalf("held at most %d bytes at once, over the 2 MiB bound", peak)
	}
	for _, c := range conns {
		c.Close()
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if now, _ := api.BodiesHeld(l); now == 0 {
			break
		} else if time.Now().After(end) {
			t.Fatalf("closed clients still hold %d bytes", now)
		}
	}
	if status, b, err := send("POST", "http://"+l.Addr()+"/admin/v1/customers", "t", strings.Repeat("x", 1<<20)); err != nil || status != 200 || string(b) != "1048576" {
		t.Fatalf("a 1 MiB body after: %d %s %v; want 200 and all of it", status, b, err)
	}
}

// TestListenerResponsesOutliveTheReadTimeout: the ReadTimeout bounds a
// request's arrival, not its answer: a handler that answers after it (an
// export, a re-rating), with a body read ahead or without one, is not cut
// off.
func TestListenerResponsesOutliveTheReadTimeout(t *testing.T) {
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			http.Error(w, "cut off", http.StatusInternalServerError)
		case <-time.After(700 * time.Millisecond):
			fmt.Fprint(w, n)
		}
	}), slog.New(slog.DiscardHandler))
	api.SetListenerLimits(l, 300*time.Millisecond, 2<<20, 100*time.Millisecond)
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	for _, c := range []struct{ method, auth, body, want string }{
		{"GET", "", "", "0"}, {"GET", "t", "", "0"}, {"POST", "t", `{"name":"x"}`, "12"},
	} {
		status, b, err := send(c.method, "http://"+l.Addr()+"/admin/v1/export", c.auth, c.body)
		if err != nil || status != 200 || string(b) != c.want {
			t.Errorf("%s with token %q: %d %s %v; want 200 %s", c.method, c.auth, status, b, err, c.want)
		}
	}
}

// TestListenerGivesBackWhatAChunkedBodyDidNotTake: a body of unknown
// length (chunked) reserves the most a body may be, 1 MiB, before it is
// read, and held all of it until its handler returned, though it was a
// few bytes: sixteen such requests with slow handlers held the whole
// budget. What it did not take goes back once it is read.
func TestListenerGivesBackWhatAChunkedBodyDidNotTake(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler <- struct{}{}
		<-release
	}), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("POST", "http://"+l.Addr()+"/admin/v1/customers", io.MultiReader(strings.NewReader(`{"name":"x"}`)))
		req.Header.Set("Authorization", "Bearer x")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-inHandler
	now, _ := api.BodiesHeld(l)
	close(release)
	<-done
	if now != int64(len(`{"name":"x"}`)) {
		t.Fatalf("a 12-byte chunked body holds %d bytes of the budget while its handler runs, want 12", now)
	}
	if now, _ := api.BodiesHeld(l); now != 0 {
		t.Fatalf("%d bytes still held once the request ended", now)
	}
}

// TestListenerReadsAheadTheBodiesOfTrustedRequestsAlone (a review): any
// request with an Authorization header or a cookie had its body read
// ahead, out of the shared budget: 16 slow 1 MiB bodies with a made-up
// cookie held all of it, and an operator's write (a console form) waited
// 30 s for a 503. With SetTrusted, a request whose credentials are not
// valid is left to its handler (which refuses it) and holds nothing; the
// operator's request is read and served at once.
func TestListenerReadsAheadTheBodiesOfTrustedRequestsAlone(t *testing.T) {
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "unauthorized", http.StatusUnauthorized) // as the admin API answers
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}), slog.New(slog.DiscardHandler))
	api.SetListenerLimits(l, 10*time.Second, 2<<20, 300*time.Millisecond)
	l.SetTrusted(func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer good" })
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	payload := make([]byte, 1<<20)
	for range 4 {
		stallBody(t, l.Addr(), 1<<20, true, payload) // "Authorization: Bearer wrong"
	}
	time.Sleep(300 * time.Millisecond) // what they would have reserved by now
	if now, peak := api.BodiesHeld(l); now != 0 || peak != 0 {
		t.Fatalf("requests with wrong credentials hold %d bytes read ahead (peak %d); want none", now, peak)
	}
	begun := time.Now()
	status, b, err := send("POST", "http://"+l.Addr()+"/admin/v1/customers", "good", strings.Repeat("x", 1<<20))
	if err != nil || status != http.StatusOK || string(b) != "1048576" {
		t.Fatalf("the operator's 1 MiB body beside them: %d %s %v; want 200 and all of it", status, b, err)
	}
	if took := time.Since(begun); took > 5*time.Second {
		t.Errorf("the operator's request took %s", took)
	}
}
