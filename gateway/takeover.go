package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A stream's connection, taken from net/http.
//
// For as long as its handler runs, net/http keeps an HTTP/1.1 client
// connection's 4 KiB read buffer, its 4 KiB write buffer, the response's
// 2 KiB buffer, the handler's goroutine and a goroutine reading in the
// background. An SSE stream's handler runs for the stream's whole life,
// mostly waiting on its upstream. So a POST over HTTP/1.1 is served on a
// goroutine of its own (the chain), and once its response is a stream whose
// header and first events are out and that has lasted takeAfter (see
// exchange.takeOver), the connection is taken (Hijack): net/http's handler
// returns and its buffers go, the chain
// writes the rest of the chunked body to the connection itself, from a
// buffer held only between a write and its flush, and the server's hangups
// poller (or, without one, a goroutine reading a byte) watches the
// connection for the client's hang-up. When the chain returns, the body's
// last chunk is written and the connection goes back to the server,
// through a listener of its own (handback), as an idle keep-alive
// connection whose next request net/http reads as usual.

// pollHangups says a started server watches taken connections with one
// epoll poller (hangups), where it can; tests turn it off to test the
// goroutine that watches each connection otherwise.
var pollHangups = true

// errClientHungUp is the cause a taken stream's context ends with when its
// client closed the connection (or a write to it failed).
var errClientHungUp = errors.New("client closed the connection")

// takeovers serves h, running every HTTP/1.1 POST on a goroutine of its own
// (one of s.chains') whose stream may take its connection (see takeover).
// Other requests go to h as they are.
func (s *Server) takeovers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok || r.Method != http.MethodPost || r.ProtoMajor != 1 || r.ProtoMinor != 1 {
			h.ServeHTTP(w, r)
			return
		}
		d, _ := w.(writeDeadliner) // net/http's *response has SetWriteDeadline
		t := &takeover{s: s, w: w, deadliner: d, hj: hj, flushTo: flusherOf(w), keepAlive: !r.Close, released: make(chan struct{})}
		ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
		t.cancel, t.reqCtx = cancel, r.Context()
		t.stopRelay = context.AfterFunc(t.reqCtx, t.relayCancel)
		r2 := r.WithContext(withState(ctx)) // filled in place (see requestState)
		t.body = &takenBody{rc: r.Body}
		r2.Body = t.body
		s.chains.do(func() { t.serve(h, r2) })
		<-t.released
		if t.panicked != nil {
			panic(t.panicked)
		}
	})
}

// takeover is the response writer of a request served by takeovers: net/http's
// writer until the connection is taken, then the connection.
type takeover struct {
	s *Server
	w http.ResponseWriter // net/http's; nil once taken
	// deadliner sets the client connection's write deadline, from any
	// goroutine and beside a write under way (see exchange.lockToCutOff):
	// net/http's writer until the connection is taken, then the connection
	// (so that net/http's response is not kept for a taken stream's life).
	// Read and replaced under dmu.
	dmu       sync.Mutex
	deadliner writeDeadliner
	hj        http.Hijacker
	flushTo   func() error // w's flush
	status    int          // the status written
	// keepAlive: the client did not ask for the connection to close.
	keepAlive bool
	body      *takenBody
	// cancel ends the chain's context; until the connection is taken,
	// relayCancel does when net/http's (reqCtx) ends (the client left).
	cancel    context.CancelCauseFunc
	reqCtx    context.Context
	stopRelay func() bool
	// released is closed when net/http's handler may return: the chain
	// returned (panicked, when it panicked), or its connection was taken.
	released chan struct{}
	panicked any

	// The take (see take). Written by take and read by the writer's
	// methods under the stream's exchange's wmu; the chain reads taken
	// after its exchange has finished, when no take can begin.
	taken  bool
	tried  bool
	conn   net.Conn
	hdr    http.Header // Header() after the take: written to nothing
	buf    *[]byte     // written, not yet flushed: a chunk's data after chunkHead bytes (from takenBufs)
	failed error       // a write to conn failed
	// rc and watch are the connection's watch by the server's hangups,
	// when it has one (watch > 0); otherwise read1 reads it, and closes
	// read1Done when its read returns.
	rc        syscall.RawConn
	watch     uint64
	read1Done chan struct{}

	// What the watcher saw (see watched), under mu.
	mu      sync.Mutex
	over    bool   // the chain ended the body: what the watcher sees now is the end's
	pending []byte // bytes of the client's next request, read already
	readErr error  // a hang-up during the stream
	read    bool   // the watcher saw the client's next request begin, or a hang-up
	lateErr error  // read1's error after the end (its read aborted, or a hang-up)
}

// takenBody is the request body the chain reads: net/http's, until the
// connection is taken (the chain has read the body by then; net/http's
// body holds its connection's buffers).
type takenBody struct {
	mu sync.Mutex
	rc io.ReadCloser
}

func (b *takenBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rc.Read(p)
}

func (b *takenBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rc.Close()
}

// drop lets net/http's body go.
func (b *takenBody) drop() {
	b.mu.Lock()
	b.rc = http.NoBody
	b.mu.Unlock()
}

func (t *takeover) relayCancel() { t.cancel(context.Cause(t.reqCtx)) }

// serve runs the chain, then ends what it began: net/http's handler goes on
// if the connection was not taken; otherwise the body's end is written and
// the connection handed on.
func (t *takeover) serve(h http.Handler, r *http.Request) {
	defer func() {
		p := recover()
		if !t.taken {
			t.stopRelay()
			t.cancel(nil)
			if p != nil && p != http.ErrAbortHandler { //nolint:errorlint // net/http compares it so
				t.s.log.Error("gateway: panic serving a request", "method", r.Method, "path", r.URL.Path,
					"panic", p, "stack", string(debug.Stack()))
				p = http.ErrAbortHandler // logged: net/http closes the connection quietly
			}
			t.panicked = p
			close(t.released)
			return
		}
		t.cancel(nil)
		if p != nil {
			if p != http.ErrAbortHandler { //nolint:errorlint
				t.s.log.Error("gateway: panic serving a stream", "method", r.Method, "path", r.URL.Path,
					"panic", p, "stack", string(debug.Stack()))
			}
			t.end(false) // the client sees a broken body, not its end
			return
		}
		t.end(true)
	}()
	h.ServeHTTP(t, r)
}

// take takes the connection from net/http, if the response is a chunked
// stream that net/http has begun and the client is still there. It is
// called once, under the stream's exchange's wmu, by its takeOver (see
// exchange.flush), after the stream's header and first events are out;
// later writes go to the connection.
func (t *takeover) take() {
	if t.tried {
		return
	}
	t.tried = true
	h := t.w.Header()
	if t.status != http.StatusOK || h.Get("Content-Length") != "" || h.Get("Transfer-Encoding") != "" {
		return // net/http did not chunk this body
	}
	// Events written since the last flush wait in net/http's response
	// buffer, which Hijack drops: they go first.
	if err := t.flushTo(); err != nil {
		return // the client is gone
	}
	if !t.stopRelay() {
		return // the client left: net/http's context ended
	}
	// Counted before the hijack: from it until the count, neither
	// http.Server.Shutdown (the connection is not net/http's any more) nor
	// Stop's wait on streams saw the stream, and Stop's grace could end
	// without cutting it off.
	t.s.streams.Add(1)
	conn, rw, err := t.hj.Hijack()
	if err != nil {
		t.s.streams.Done()
		t.stopRelay = context.AfterFunc(t.reqCtx, t.relayCancel)
		return
	}
	if n := rw.Reader.Buffered(); n > 0 { // a request the client sent ahead (pipelining)
		b, _ := rw.Reader.Peek(n)
		t.pending = append([]byte(nil), b...)
	}
	t.taken, t.conn = true, conn
	t.dmu.Lock()
	t.deadliner = conn
	t.dmu.Unlock()
	t.w, t.hj, t.flushTo, t.reqCtx = nil, nil, nil, nil
	t.body.drop()
	t.s.taken.Add(1)
	if pc, ok := conn.(*prefixConn); ok && len(pc.pre) > 0 {
		t.pending = append(t.pending, pc.pre...) // not read by net/http yet: kept in order
		pc.pre = nil
	}
	t.mu.Lock()
	t.read = len(t.pending) > 0
	t.mu.Unlock()
	if !t.read && !t.pollHangUps() {
		t.read1Done = make(chan struct{})
		t.s.watchers.Go(t.read1)
	} // else the next request has begun: nothing to watch for

	close(t.released)
}

// pollHangUps has the server's hangups poller watch the connection, and
// reports whether it does.
func (t *takeover) pollHangUps() bool {
	if t.s.hangups == nil {
		return false
	}
	rc, err := rawConnOf(t.conn)
	if err != nil {
		return false
	}
	id, ok := t.s.hangups.add(t, rc)
	if ok {
		t.rc, t.watch = rc, id
		t.s.polled.Add(1)
	}
	return ok
}

// chunkHead is the room kept before a chunk's data for its size line: up
// to 8 hex digits and CRLF.
const chunkHead = 10

// bodyEnd is a chunked body's last chunk, without trailers.
var bodyEnd = []byte("0\r\n\r\n")

// takenBufs holds the buffers of taken streams between a write and its
// flush.
var takenBufs = sync.Pool{New: func() any { b := make([]byte, chunkHead, 4<<10); return &b }}

// Header is the response's header; once the connection is taken it is
// sent already, and changes go nowhere.
func (t *takeover) Header() http.Header {
	if t.taken {
		if t.hdr == nil {
			t.hdr = http.Header{}
		}
		return t.hdr
	}
	return t.w.Header()
}

func (t *takeover) WriteHeader(code int) {
	if t.taken {
		return
	}
	if t.status == 0 && code >= 200 {
		t.status = code
	}
	t.w.WriteHeader(code)
}

func (t *takeover) Write(p []byte) (int, error) {
	if !t.taken {
		if t.status == 0 {
			t.status = http.StatusOK
		}
		return t.w.Write(p)
	}
	if t.failed != nil {
		return 0, t.failed
	}
	if t.buf == nil {
		t.buf = takenBufs.Get().(*[]byte)
	}
	*t.buf = append(*t.buf, p...)
	if len(*t.buf)-chunkHead >= takenSendAt {
		// The relay flushes only when its upstream has nothing more on the
		// way: an upstream faster than the client would otherwise have
		// its whole stream held here, and a client that reads nothing
		// would never meet its write deadline.
		if err := t.send(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// takenSendAt is how much a taken stream holds, in bytes, before it writes
// it to the connection as a chunk without waiting for a flush (as
// net/http's own buffer does).
const takenSendAt = 32 << 10

// FlushError sends what was written: once taken, as one chunk. A failed
// write ends the chain's context: the client is gone.
func (t *takeover) FlushError() error {
	if !t.taken {
		return t.flushTo()
	}
	return t.send(false)
}

// send writes what was written to the connection as one chunk, and with
// last the body's end after it, in the same write. A failed write ends the
// chain's context: the client is gone.
func (t *takeover) send(last bool) error {
	if t.failed != nil {
		return t.failed
	}
	if t.buf == nil && !last {
		return nil
	}
	if t.buf == nil {
		t.buf = takenBufs.Get().(*[]byte)
	}
	b := *t.buf
	at := chunkHead
	if len(b) > chunkHead {
		var sz [16]byte
		size := strconv.AppendUint(sz[:0], uint64(len(b)-chunkHead), 16)
		at = chunkHead - len(size) - 2
		copy(b[at:], size)
		b[chunkHead-2], b[chunkHead-1] = '\r', '\n'
		b = append(b, '\r', '\n')
	}
	if last {
		b = append(b, bodyEnd...)
	}
	_, err := t.conn.Write(b[at:])
	*t.buf = b
	t.release()
	if err != nil {
		t.failed = err
		t.cancel(errClientHungUp)
	}
	return err
}

// release returns the write buffer to takenBufs (one grown past
// maxTakenBuf is dropped).
func (t *takeover) release() {
	if t.buf == nil {
		return
	}
	if cap(*t.buf) <= maxTakenBuf {
		*t.buf = (*t.buf)[:chunkHead]
		takenBufs.Put(t.buf)
	}
	t.buf = nil
}

// maxTakenBuf is the largest write buffer takenBufs keeps, in bytes.
const maxTakenBuf = 64 << 10

// Unwrap is net/http's writer, for http.ResponseController; nil once taken.
func (t *takeover) Unwrap() http.ResponseWriter { return t.w }

// takeoverOf finds the takeover under w, or nil.
func takeoverOf(w http.ResponseWriter) *takeover {
	for w != nil {
		switch u := w.(type) {
		case *takeover:
			return u
		case interface{ Unwrap() http.ResponseWriter }:
			w = u.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// read1 waits on a taken connection with a read of one byte, as net/http's
// background read does, where the server has no hangups poller.
func (t *takeover) read1() {
	defer close(t.read1Done)
	var b [1]byte
	n, err := t.conn.Read(b[:])
	t.watched(b[:n], err)
}

// watched is what the watcher saw on a taken connection during the
// stream: bytes of the client's next request (from read1; the poller
// leaves them in the socket), kept for the server, or an error, a hang-up,
// which ends the chain's context. After the end, read1's error is the
// end's to judge (it aborts the read).
func (t *takeover) watched(b []byte, err error) {
	t.mu.Lock()
	t.pending = append(t.pending, b...)
	hungUp := false
	switch {
	case t.over:
		t.lateErr = err
	case !t.read:
		t.readErr, t.read = err, true
		hungUp = err != nil
	}
	t.mu.Unlock()
	if hungUp {
		t.cancel(errClientHungUp)
	}
}

// end writes the body's end (when whole, and the client is there), stops
// the watcher, and gives the connection back to the server for the
// client's next request, or closes it (the body did not end whole, the
// client hung up or asked to close, the gateway is stopping).
func (t *takeover) end(whole bool) {
	if whole && t.failed == nil {
		_ = t.send(true) // what the chain left unflushed, and the body's end: one write
	}
	t.release()
	t.s.streams.Done()
	t.mu.Lock()
	t.over = true
	read, err := t.read, t.readErr
	t.mu.Unlock()
	t.unwatch()
	if t.read1Done != nil && !read { // read1 still reads: abort it, as net/http aborts its own
		_ = t.conn.SetReadDeadline(longAgo)
		<-t.read1Done
		t.mu.Lock()
		late := t.lateErr
		t.mu.Unlock()
		var ne net.Error
		if late != nil && !(errors.As(late, &ne) && ne.Timeout()) {
			err = late // the client hung up meanwhile
		}
	}
	if !whole || t.failed != nil || !t.keepAlive || t.s.stopping.Load() || err != nil {
		_ = t.conn.Close()
		return
	}
	_ = t.conn.SetWriteDeadline(time.Time{}) // the stream's (see armWriteDeadline)
	t.handOn()
}

// unwatch ends the poller's watch, if any; an event already reported for
// it goes nowhere.
func (t *takeover) unwatch() {
	if t.watch != 0 {
		t.s.hangups.remove(t.watch, t.rc)
	}
}

// handOn gives the connection back to the server, with the bytes of the
// client's next request read already. Until that request begins, the
// connection may stay idle for IdleTimeout, as a keep-alive connection of
// net/http's may (net/http gives a connection new to it
// ReadHeaderTimeout).
func (t *takeover) handOn() {
	t.mu.Lock()
	pending := t.pending
	t.mu.Unlock()
	_ = t.conn.SetReadDeadline(time.Time{})
	pc, ok := t.conn.(*prefixConn)
	if !ok {
		pc = &prefixConn{Conn: t.conn, hb: t.s.handback}
		if cc := capOf(t.conn); cc != nil {
			cc.outer.Store(pc)
		}
	}
	pc.pre = append(pending, pc.pre...) // pending was read first
	pc.idleUntil, pc.asked = time.Time{}, time.Time{}
	pc.shift.Store(0)
	if d := t.s.handback.idleFor; d > 0 {
		pc.idleUntil = time.Now().Add(d)
	}
	pc.begun.Store(len(pc.pre) > 0)
	t.s.handback.give(pc)
}

// prefixConn is a connection a stream took and gave back: its first reads
// return pre, and until the client's next request begins, the connection
// is idle: a read deadline net/http sets is moved to idleUntil
// (IdleTimeout), and put back, as late as it was waited, when the request
// begins; and it is on hb's list of idle connections, which its Close
// closes. net/http reckons every deadline of that request (the header's,
// then the whole request's, ReadTimeout) from when it began to read the
// connection, at the hand-back: so the deadlines it sets once the request
// has begun are moved on by the time waited too, until it clears the
// deadline.
type prefixConn struct {
	net.Conn
	hb        *handback
	pre       []byte
	idleUntil time.Time
	begun     atomic.Bool // the next request's first byte was read
	// asked is the deadline net/http set while idle, at askedAt (read and
	// written by net/http's reading goroutine alone while idle).
	asked, askedAt time.Time
	// shift is how long the connection waited idle, added to each deadline
	// set once the request has begun, until a zero deadline (0: none).
	shift atomic.Int64
}

// SyscallConn is the connection's (see rawConnOf).
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) { return rawConnOf(c.Conn) }

// Close closes the connection and takes it off the handback's idle list:
// one closed while idle (IdleTimeout, the client, the connection cap)
// stayed on it until the server stopped.
func (c *prefixConn) Close() error {
	c.hb.busy(c)
	return c.Conn.Close()
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		c.begin()
		return n, nil
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.begin()
	}
	return n, err
}

// begin marks the client's next request begun: the connection is no
// longer idle, and net/http's deadline applies from now.
func (c *prefixConn) begin() {
	if c.begun.Swap(true) {
		return
	}
	c.hb.busy(c)
	if !c.asked.IsZero() {
		waited := time.Since(c.askedAt)
		c.shift.Store(int64(max(waited, 1)))
		_ = c.Conn.SetReadDeadline(c.asked.Add(waited))
	}
}

// SetReadDeadline sets d; while idle, idleUntil instead; once the request
// has begun, d moved on by the time waited (see prefixConn).
func (c *prefixConn) SetReadDeadline(d time.Time) error {
	if c.begun.Load() || c.idleUntil.IsZero() {
		if d.IsZero() {
			c.shift.Store(0)
		} else if shift := c.shift.Load(); shift > 0 {
			d = d.Add(time.Duration(shift))
		}
		return c.Conn.SetReadDeadline(d)
	}
	c.asked, c.askedAt = d, time.Now()
	return c.Conn.SetReadDeadline(c.idleUntil)
}

// writeDeadliner is what sets a connection's write deadline: net/http's
// response writer (HTTP/1.1) or a net.Conn.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// setWriteDeadlineNow sets the client connection's write deadline to now,
// from any goroutine: a write blocked on it fails.
func (t *takeover) setWriteDeadlineNow() error {
	t.dmu.Lock()
	d := t.deadliner
	t.dmu.Unlock()
	if d == nil {
		return http.ErrNotSupported
	}
	return d.SetWriteDeadline(time.Now())
}
