package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// Listener serves a process's admin listener: the admin API when the
// process runs the admin role, and beside it the operations endpoints
// every role serves (/metrics, /healthz, /readyz), all in one handler.
// Start listens; Stop shuts it down, letting requests in flight finish.
type Listener struct {
	h        http.Handler
	log      *slog.Logger
	srv      *http.Server
	addr     string
	stopOnce sync.Once
	serving  sync.WaitGroup // the goroutine serving srv; Stop waits for it
	// cut cancels the contexts of the requests served, for those still in
	// flight when Stop's wait ends (an export).
	cut context.CancelFunc
	// active counts the handlers running, which Stop waits for (up to
	// cutWait) once it has cut them off: net/http's Close does not.
	active atomic.Int64
}

// cutWait bounds Stop's wait for the handlers it cut off to return, so
// that what the process closes after it (the database) is no longer in
// use.
const cutWait = 5 * time.Second

// NewListener returns a Listener serving h.
func NewListener(h http.Handler, log *slog.Logger) *Listener {
	return &Listener{h: h, log: log}
}

// Start listens on addr ("host:port"; port 0 picks one) and serves, and
// returns once it is listening. A request's body is read (at most 8 MiB)
// within 60 s of its start; its response, an export or a re-rating, may
// take longer. Idle keep-alive connections close after 120 s.
func (l *Listener) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	l.addr = ln.Addr().String()
	base, cut := context.WithCancel(context.Background())
	l.cut = cut
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.active.Add(1)
		defer l.active.Add(-1)
		l.h.ServeHTTP(w, r)
	})
	l.srv = &http.Server{Handler: readAhead(counted), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(l.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return base }}
	l.serving.Go(func() {
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("admin listener", "addr", l.addr, "err", err)
		}
	})
	return nil
}

// Addr is the address Start bound.
func (l *Listener) Addr() string { return l.addr }

// Stop stops accepting and waits for requests in flight until ctx ends,
// then cuts off what is left (an export: its request's context is
// cancelled, its connection closed) and waits up to 5 s more for those
// handlers to return. A cut-off is part of a shutdown, logged, not an
// error: Stop returns nil. It is idempotent and safe on a Listener never
// started.
func (l *Listener) Stop(ctx context.Context) error {
	l.stopOnce.Do(func() {
		if l.srv == nil {
			return
		}
		defer l.cut() // the base context's end, whatever happened
		if err := l.srv.Shutdown(ctx); err != nil {
			l.log.Warn("admin listener: requests still in flight cut off at shutdown", "requests", l.active.Load(), "err", err)
			l.cut()
			_ = l.srv.Close()
			for end := time.Now().Add(cutWait); l.active.Load() > 0 && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		l.serving.Wait() // Serve returns once Shutdown or Close has closed its listener
	})
	return nil
}

// readAhead reads a request's body (at most 8 MiB) before its handler
// runs, then lifts the listener's ReadTimeout: a slow client is bounded
// while it sends its request, and a long response (an export, a
// re-rating) is not cut off by it. (net/http cancels a request's context
// when the read deadline passes, even after its body was read.)
func readAhead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
			if err != nil {
				writeError(w, ledger.EInvalid, "reading the request body: "+err.Error())
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		next.ServeHTTP(w, r)
	})
}
