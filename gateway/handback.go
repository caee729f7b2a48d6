package gateway

import (
	"net"
	"sync"
	"time"
)

// handback is a listener of the gateway's own, served by its http.Server
// beside the real one: connections taken by streams (see takeover) come
// back through it once their stream has ended and the client's next
// request has begun, and net/http serves them as any new connection. It
// holds, until then, the taken connections waiting idle for that request:
// each waits at most idleFor, and Close ends the wait of all.
type handback struct {
	addr    net.Addr
	idleFor time.Duration // a keep-alive connection's idle time; 0: no limit
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once

	mu      sync.Mutex
	closed  bool
	waiting map[*takeover]struct{}
}

func newHandback(addr net.Addr, idleFor time.Duration) *handback {
	return &handback{addr: addr, idleFor: idleFor, conns: make(chan net.Conn), done: make(chan struct{}),
		waiting: map[*takeover]struct{}{}}
}

// Accept returns the next connection given back, or net.ErrClosed once
// closed.
func (h *handback) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and ends every idle wait now (the gateway is
// stopping: idle connections close, as net/http closes its own).
func (h *handback) Close() error {
	h.once.Do(func() {
		close(h.done)
		h.mu.Lock()
		h.closed = true
		for t := range h.waiting {
			t.stopWaiting()
		}
		h.mu.Unlock()
	})
	return nil
}

// Addr is the address of the gateway's listener.
func (h *handback) Addr() net.Addr { return h.addr }

// give hands c to the server, or closes it when the listener is closed.
func (h *handback) give(c net.Conn) {
	select {
	case h.conns <- c:
	case <-h.done:
		_ = c.Close()
	}
}

// idle starts t's wait for the client's next request, for at most idleFor
// (none, once closed). Called under t.mu.
func (h *handback) idle(t *takeover) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		t.stopWaiting()
		return
	}
	if h.idleFor > 0 {
		t.waitFor(h.idleFor)
	}
	h.waiting[t] = struct{}{}
}

// busy ends t's wait. Called under t.mu.
func (h *handback) busy(t *takeover) {
	h.mu.Lock()
	delete(h.waiting, t)
	h.mu.Unlock()
	if t.idleTimer != nil {
		t.idleTimer.Stop()
	}
}

// longAgo is a deadline in the past: a read waiting on it returns now.
var longAgo = time.Unix(1, 0)
