package api_test

import (
	"context"
	"io"
	"log/slog"
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

// TestListenerRefusesBodiesOver8MiB: a request body over 8 MiB is refused
// with the API's invalid error before the handler runs.
func TestListenerRefusesBodiesOver8MiB(t *testing.T) {
	ran := false
	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	resp, err := http.Post("http://"+l.Addr()+"/v1/customers", "application/json", strings.NewReader(strings.Repeat("x", 8<<20+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"invalid"`) || ran {
		t.Fatalf("status %d, body %s, handler ran %v; want 400 invalid before the handler", resp.StatusCode, b, ran)
	}
}
