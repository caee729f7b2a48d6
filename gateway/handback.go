package gateway

import (
	"maps"
	"net"
	"slices"
	"sync"
	"time"
)

// handback is a listener of the gateway's own, served by its http.Server
// beside the real one: connections taken by streams (see takeover) come
// back through it once their stream has ended, and net/http serves them as
// any new connection. Until the client's next request begins on one, it
// is idle, and Close closes it (as http.Server.Shutdown closes its own idle
// connections; it would wait 5 s for one it sees as new).
type handback struct {
	addr    net.Addr
	idleFor time.Duration // a keep-alive connection's idle time; 0: no limit
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once

	mu     sync.Mutex
	closed bool
	idle   map[*prefixConn]struct{}
}

func newHandback(addr net.Addr, idleFor time.Duration) *handback {
	return &handback{addr: addr, idleFor: idleFor, conns: make(chan net.Conn), done: make(chan struct{}),
		idle: map[*prefixConn]struct{}{}}
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

// Close stops Accept, and closes the idle connections given back.
func (h *handback) Close() error {
	h.once.Do(func() {
		close(h.done)
		h.mu.Lock()
		h.closed = true
		idle := slices.Collect(maps.Keys(h.idle))
		clear(h.idle)
		h.mu.Unlock()
		for _, c := range idle { // outside mu: a prefixConn's Close takes it
			_ = c.Close()
		}
	})
	return nil
}

// Addr is the address of the gateway's listener.
func (h *handback) Addr() net.Addr { return h.addr }

// give hands c to the server, or closes it when the listener is closed.
func (h *handback) give(c *prefixConn) {
	if !c.begun.Load() {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = c.Close()
			return
		}
		h.idle[c] = struct{}{}
		h.mu.Unlock()
	}
	select {
	case h.conns <- c:
	case <-h.done:
		h.busy(c)
		_ = c.Close()
	}
}

// busy takes c off the idle list: its next request has begun.
func (h *handback) busy(c *prefixConn) {
	h.mu.Lock()
	delete(h.idle, c)
	h.mu.Unlock()
}

// longAgo is a deadline in the past: a read waiting on it returns now.
var longAgo = time.Unix(1, 0)
