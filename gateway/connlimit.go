package gateway

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// reservedFiles is the file descriptors ConnectionCap leaves to the rest
// of the process: JetStream's stream files, the Postgres pool, the crash
// journal, the spool, the admin listener and the upstreams' idle pool.
const reservedFiles = 1024

// ConnectionCap is the client connections the gateway's listener holds at
// once: cfg.MaxConnections when set, otherwise what the process's
// RLIMIT_NOFILE leaves after reservedFiles and the upstream connections of
// MaxDrains streams read on after their clients left, divided by the
// descriptors a stream holds (2 when any provider is reached over
// HTTP/1.1 or HTTPS: the client's and the upstream's; 1 when every
// provider is on h2c, whose streams share connections). It is at least 64.
// cfg has been validated.
func ConnectionCap(cfg Config) int {
	if cfg.MaxConnections > 0 {
		return cfg.MaxConnections
	}
	files := openFilesLimit()
	perStream := 1
	for _, p := range cfg.Providers {
		if p.Protocol != ProtocolH2C {
			perStream = 2
		}
	}
	return max(64, (files-reservedFiles-cfg.MaxDrains)/perStream)
}

// limitListener caps ln at n connections at once. A new connection while
// n are open first closes a connection no request is using (closeOldest;
// the server must report its connections' states to connState), and
// waits for a slot when there is none. Its connections keep their
// descriptor reachable (syscall.Conn), for the hang-up poller of taken
// streams (see hangups).
func limitListener(ln net.Listener, n int) *capListener {
	return &capListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}), conns: map[*capConn]struct{}{}}
}

type capListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
	// conns are the connections open (added at Accept, removed at Close:
	// once a connection, not once a request).
	mu    sync.Mutex
	conns map[*capConn]struct{}
}

// reclaimEvery is how often a listener at its cap, with a client waiting,
// tries again to close a connection no request is using.
const reclaimEvery = 500 * time.Millisecond

// Accept takes a connection and then a slot, which the connection gives
// back when it closes. With every slot held, it closes a connection
// between requests for the new one, or else waits (holding the one
// connection accepted) until a slot frees, trying again every
// reclaimEvery.
func (l *capListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return l.track(c), nil
		default:
		}
		if l.closeOldest() {
			continue // its Close gave its slot back
		}
		select {
		case l.slots <- struct{}{}:
			return l.track(c), nil
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		case <-time.After(reclaimEvery):
		}
	}
}

// track wraps c, holding a slot, as a capConn of l's.
func (l *capListener) track(c net.Conn) *capConn {
	cc := &capConn{Conn: c}
	cc.use.since.Store(time.Now().UnixNano())
	cc.use.state.Store(connNew)
	cc.release = func() {
		l.mu.Lock()
		delete(l.conns, cc)
		l.mu.Unlock()
		<-l.slots
	}
	l.mu.Lock()
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	return cc
}

// Close closes the listener, and ends an Accept waiting for a slot.
func (l *capListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// capConn is a connection holding one of its listener's slots.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
	use     connUse
	// outer is the prefixConn a stream gave it back to the server in, if
	// any: closed through it, it leaves the handback's idle list.
	outer atomic.Pointer[prefixConn]
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// SyscallConn is the underlying connection's (see rawConnOf).
func (c *capConn) SyscallConn() (syscall.RawConn, error) { return rawConnOf(c.Conn) }

// rawConnOf is c's descriptor access, or errors.ErrUnsupported when c has
// none.
func rawConnOf(c net.Conn) (syscall.RawConn, error) {
	if sc, ok := c.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
