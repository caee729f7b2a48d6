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

	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"

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
	// readTimeout is the server's ReadTimeout (listenerReadTimeout; tests
	// shorten it).
	readTimeout time.Duration
	// bodies bounds the request bodies held read ahead at once.
	bodies *bodyBudget
}

// listenerReadTimeout is how long a request may take to arrive, headers
// and body, from the start of its read.
const listenerReadTimeout = 60 * time.Second

// readAheadBudget is the most, in bytes, of request bodies the admin
// listener holds read ahead at once, across all its connections: 16
// bodies of the largest size the API reads (maxBody).
const readAheadBudget = 16 * maxBody

// cutWait bounds Stop's wait for the handlers it cut off to return, so
// that what the process closes after it (the database) is no longer in
// use.
const cutWait = 5 * time.Second

// NewListener returns a Listener serving h.
func NewListener(h http.Handler, log *slog.Logger) *Listener {
	return &Listener{h: h, log: log, readTimeout: listenerReadTimeout,
		bodies: newBodyBudget(readAheadBudget, listenerReadTimeout/2)}
}

// Start listens on addr ("host:port"; port 0 picks one) and serves, and
// returns once it is listening. A request's body is read (at most 1 MiB,
// the API's bound; see readAhead) within 60 s of its start; its response,
// an export or a re-rating, may take longer. Idle keep-alive connections
// close after 120 s.
func (l *Listener) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	l.addr = ln.Addr().String()
	ln = netutil.LimitListener(newPerAddressListener(lowWaterListener{ln}, l.log), maxConnections)
	base, cut := context.WithCancel(context.Background())
	l.cut = cut
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.active.Add(1)
		defer l.active.Add(-1)
		l.h.ServeHTTP(w, r)
	})
	l.srv = &http.Server{Handler: l.bodies.readAhead(counted), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: l.readTimeout,
		IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(l.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return base }}
	l.serving.Go(func() {
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("admin listener", "addr", l.addr, "err", err)
		}
	})
	return nil
}

// maxConnections is the most connections the admin listener holds at
// once; more wait in the kernel's accept queue, holding no descriptor of
// the process, until one closes (one that sends nothing within 10 s,
// ReadHeaderTimeout; one idle between requests within 120 s,
// IdleTimeout). Operators, the console, Prometheus and health checks need
// tens. Uncapped, clients that connected and sent nothing took every
// descriptor the process had, and its JetStream store, crash journal,
// spool and Postgres pool failed: this is a quarter of what the gateway's
// connection cap leaves the rest of the process (gateway.ConnectionCap,
// 1,024).
const maxConnections = 256

// notSentLowWater is the unsent bytes, in bytes, a connection of the
// admin listener queues before its writes wait (see lowWater).
const notSentLowWater = 64 << 10

// lowWaterListener sets each connection it accepts to notSentLowWater.
type lowWaterListener struct{ net.Listener }

func (l lowWaterListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		lowWater(c)
	}
	return c, err
}

// Addr is the address Start bound.
func (l *Listener) Addr() string { return l.addr }

// SetTrusted sets how the listener tells a request whose credentials are
// valid (the admin token, a console session: Admin.Authorized,
// web.Console.SignedIn): only such a request has its body read ahead, out
// of the bodies' shared budget, and its ReadTimeout lifted. Without it,
// any request with an Authorization header or a cookie had, and a client
// with none of the operators' credentials could hold the whole budget
// with 16 slow bodies, every operator's write waiting behind them (a
// review: a console form answered 503 after 30 s). Call it before Start;
// unset, a request with either header counts as one with credentials.
func (l *Listener) SetTrusted(trusted func(*http.Request) bool) { l.bodies.trusted = trusted }

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

// bodyBudget bounds the bytes of request bodies held read ahead at once
// across a listener's connections: a body reserves its Content-Length
// (maxBody+1 when it has none) before it is read, and gives it back once
// its handler has returned.
type bodyBudget struct {
	sem *semaphore.Weighted
	// wait is the longest a request waits for room before it is answered
	// 503: half the listener's ReadTimeout, so that the other half is left
	// to read its body.
	wait time.Duration
	// held is the bytes reserved now; peak the most ever reserved at once.
	held, peak atomic.Int64
	// trusted tells a request with valid credentials (Listener.SetTrusted);
	// nil: one with an Authorization header or a cookie.
	trusted func(*http.Request) bool
}

func newBodyBudget(total int64, wait time.Duration) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(total), wait: wait}
}

// reserve waits up to b.wait for n bytes of room, returning false when
// there was none in time.
func (b *bodyBudget) reserve(ctx context.Context, n int64) bool {
	ctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if b.sem.Acquire(ctx, n) != nil {
		return false
	}
	h := b.held.Add(n)
	for p := b.peak.Load(); h > p && !b.peak.CompareAndSwap(p, h); p = b.peak.Load() {
	}
	return true
}

func (b *bodyBudget) release(n int64) {
	b.held.Add(-n)
	b.sem.Release(n)
}

// readAhead reads a request's body before its handler runs, then lifts the
// listener's ReadTimeout: a slow client is bounded while it sends its
// request, and a long response (an export, a re-rating) is not cut off by
// it. (net/http cancels a request's context when the read deadline passes,
// even after its body was read.)
//
// Only a request that carries credentials (an Authorization header or a
// cookie, the console's session; valid ones, when the listener was told
// how to tell them: SetTrusted) has its body read ahead, at most maxBody
// bytes, the most any admin or console route reads: a longer one is
// refused, EInvalid, before it is read. Its bytes come out of b (a request
// waiting for room past b.wait is answered EUnavailable, 503), into one
// buffer of its Content-Length when it gives one. A request without
// credentials has nothing to read ahead: its handler refuses it, or (the
// sign-in form) reads a small body itself within the ReadTimeout, which
// then stays in place. A request without a body has its ReadTimeout lifted
// all the same (/metrics, a pprof profile, an export).
func (b *bodyBudget) readAhead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
		credentials := r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != ""
		if b.trusted != nil && credentials {
			credentials = b.trusted(r)
		}
		if hasBody && !credentials {
			next.ServeHTTP(w, r)
			return
		}
		if hasBody {
			if r.ContentLength > maxBody {
				writeError(w, ledger.EInvalid, fmt.Sprintf("request body: larger than %d bytes (1 MiB)", maxBody))
				return
			}
			n := r.ContentLength
			if n < 0 {
				n = maxBody + 1
			}
			if !b.reserve(r.Context(), n) {
				w.Header().Set("Retry-After", "1")
				writeError(w, ledger.EUnavailable, "the admin listener holds as many request bodies as it reads at once: try again")
				return
			}
			defer func() { b.release(n) }()
			body, err := readAll(r.Body, r.ContentLength)
			if err != nil {
				writeError(w, ledger.EInvalid, "reading the request body: "+err.Error())
				return
			}
			if unused := n - int64(len(body)); unused > 0 {
				// A body of unknown length reserved the most: what it did not
				// take goes back now, not when its handler returns.
				b.release(unused)
				n = int64(len(body))
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		next.ServeHTTP(w, r)
	})
}

// readAll reads a body of length n bytes (-1: unknown) into one buffer of
// that size, or, unknown, up to maxBody bytes; a longer one is an error.
func readAll(body io.Reader, n int64) ([]byte, error) {
	if n >= 0 {
		buf := make([]byte, n)
		_, err := io.ReadFull(body, buf)
		return buf, err
	}
	buf, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err == nil && len(buf) > maxBody {
		err = fmt.Errorf("larger than %d bytes (1 MiB)", maxBody)
	}
	return buf, err
}
