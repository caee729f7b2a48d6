package gateway

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"time"
)

// newConnGrace is how long a connection may wait for its first request's
// headers before a listener at its cap may close it for a new client
// (ReadHeaderTimeout closes it at 10 s anyway).
const newConnGrace = 2 * time.Second

// idleConns follows the gateway's client connections that no request is
// using (http.Server.ConnState): keep-alive connections between requests,
// and new ones whose first request has not come, oldest first. A listener
// at its cap closes the oldest for a new client (closeOldest), as
// http.Server.Shutdown closes idle connections: without it, any client,
// with no key (GET /healthz), could hold every slot with idle keep-alive
// connections for IdleTimeout, renewed by a request every 2 minutes, and
// no other client was answered.
type idleConns struct {
	now   func() time.Time
	mu    sync.Mutex
	order list.List // of *idleConn, oldest first
	at    map[net.Conn]*list.Element
}

// idleConn is a connection no request is using, since when, and whether
// it has served a request (keep-alive) or not yet (new).
type idleConn struct {
	c     net.Conn
	since time.Time
	fresh bool
}

func newIdleConns() *idleConns { return &idleConns{now: time.Now, at: map[net.Conn]*list.Element{}} }

// connState is the http.Server's ConnState hook.
func (ic *idleConns) connState(c net.Conn, s http.ConnState) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if e, ok := ic.at[c]; ok {
		ic.order.Remove(e)
		delete(ic.at, c)
	}
	if s == http.StateIdle || s == http.StateNew {
		ic.at[c] = ic.order.PushBack(&idleConn{c: c, since: ic.now(), fresh: s == http.StateNew})
	}
}

// closeOldest closes the connection idle the longest, skipping new ones
// within newConnGrace of their start, and reports whether it closed one.
func (ic *idleConns) closeOldest() bool {
	ic.mu.Lock()
	now := ic.now()
	var victim net.Conn
	for e := ic.order.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*idleConn); !c.fresh || now.Sub(c.since) >= newConnGrace {
			victim = c.c
			ic.order.Remove(e)
			delete(ic.at, c.c)
			break
		}
	}
	ic.mu.Unlock()
	if victim == nil {
		return false
	}
	_ = victim.Close()
	return true
}
