package gateway

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// newConnGrace is how long a connection may wait for its first request's
// headers before a listener at its cap may close it for a new client
// (ReadHeaderTimeout closes it at 10 s anyway).
const newConnGrace = 2 * time.Second

// A client connection's use, as http.Server.ConnState reports it, kept on
// its capConn (connUse): a listener at its cap closes the one unused the
// longest for a new client (capListener.closeOldest), as
// http.Server.Shutdown closes idle connections. Without it, any client,
// with no key (GET /healthz), could hold every slot with idle keep-alive
// connections for IdleTimeout, renewed by a request every 2 minutes, and
// no other client was answered.
const (
	connBusy    = iota // a request is using it (or it was taken by a stream)
	connIdle           // a keep-alive connection between requests
	connNew            // open, its first request not begun
	connClosing        // chosen to be closed for a new client
)

// connUse is a connection's use and since when (unix nanoseconds): two
// atomic stores a state change, no lock, on every request.
type connUse struct {
	state atomic.Int32
	since atomic.Int64
}

// idleGrace is how long a keep-alive connection must have been idle
// before a listener at its cap may close it: net/http says a connection
// is in use only once its next request's headers are read, and a client
// whose next request is on the wire would see it fail (a POST is not
// retried). An attacker's idle connections are idle far longer.
const idleGrace = time.Second

// connState is the gateway's http.Server ConnState hook.
func connState(c net.Conn, s http.ConnState) {
	cc := capOf(c)
	if cc == nil {
		return
	}
	next := int32(connBusy)
	switch s {
	case http.StateNew:
		next = connNew
	case http.StateIdle:
		next = connIdle
	}
	if next != connBusy {
		cc.use.since.Store(time.Now().UnixNano())
	}
	for { // never over connClosing: the connection is being closed
		cur := cc.use.state.Load()
		if cur == connClosing || cc.use.state.CompareAndSwap(cur, next) {
			return
		}
	}
}

// capOf is the capConn under c: c itself, or the connection a stream took
// and handed back (prefixConn); nil for another.
func capOf(c net.Conn) *capConn {
	for {
		switch v := c.(type) {
		case *capConn:
			return v
		case *prefixConn:
			c = v.Conn
		default:
			return nil
		}
	}
}

// reclaimSample bounds the connections closeOldest reads at a time: a
// map's iteration starts at a random place, so they are a sample, and
// the cap may be hundreds of thousands.
const reclaimSample = 1024

// closeOldest closes the connection of l unused the longest among a
// sample of them: a keep-alive connection idle past idleGrace, or a new
// one past newConnGrace. It reports whether it closed one (its slot is
// then free). It runs only with every slot held and a client waiting.
func (l *capListener) closeOldest() bool {
	now := time.Now().UnixNano()
	var victim *capConn
	var oldest int64
	var victimState int32
	l.mu.Lock()
	n := 0
	for cc := range l.conns {
		if n++; n > reclaimSample {
			break
		}
		st, since := cc.use.state.Load(), cc.use.since.Load()
		if (st == connIdle && now-since >= int64(idleGrace)) || (st == connNew && now-since >= int64(newConnGrace)) {
			if victim == nil || since < oldest {
				victim, oldest, victimState = cc, since, st
			}
		}
	}
	l.mu.Unlock()
	if victim == nil || !victim.use.state.CompareAndSwap(victimState, connClosing) {
		return false
	}
	if pc := victim.outer.Load(); pc != nil {
		_ = pc.Close() // a connection a stream gave back: off its idle list too
	} else {
		_ = victim.Close()
	}
	return true
}
