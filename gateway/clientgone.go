package gateway

import (
	"context"
	"net"
)

// A client that left before its request went upstream.
//
// A client can send its request and hang up before the gateway reads it:
// its connection waited for a slot (the connection cap, see
// capListener) or in the listen backlog, and the client's own timeout
// ran out meanwhile (curl's --max-time). The request and the hang-up are
// both in the socket when the gateway reads it. net/http notices the
// hang-up only in its background read, on a goroutine of its own, which
// the handler usually outruns: the upstream was asked, its answer drained
// for the usage (see exchange.clientLeft), and the client, who could never
// receive a byte, billed the whole completion (client_cancelled, or ok for
// a non-streamed answer complete before the hang-up was seen). So just
// before the upstream is asked, the client's socket is looked at: a
// hang-up there means no upstream request and nothing billed.

// clientConnKey is the context key of a request's client connection
// (http.Server.ConnContext).
type clientConnKey struct{}

// withClientConn is the gateway's http.Server ConnContext: ctx with c,
// the client connection, for clientHungUp.
func withClientConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, clientConnKey{}, c)
}

// clientHungUp reports whether the client connection of the request of
// ctx has been closed by the client (its end of stream, or a reset, is in
// the socket, with no bytes before it), without reading it. It reports
// false when it cannot tell (no connection in ctx, no descriptor, or a
// platform without a non-blocking peek).
func clientHungUp(ctx context.Context) bool {
	c, _ := ctx.Value(clientConnKey{}).(net.Conn)
	if c == nil {
		return false
	}
	rc, err := rawConnOf(c)
	if err != nil {
		return false
	}
	return peekHungUp(rc)
}
