package gateway

import (
	"context"
	"net"
)

// dialReadAhead dials as dial does, and wraps the TCP connections it
// returns in a readAheadConn; other connections are returned as they are.
func dialReadAhead(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newReadAheadConn(c), nil
	}
}
