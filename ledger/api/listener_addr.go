package api

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxConnectionsPerAddress is the most connections the admin listener
// holds at once from one client address (an IPv4 address, an IPv6 /64:
// clientPrefix), a quarter of maxConnections. A connection past it is
// closed as soon as it is accepted. One address could hold every one of
// the listener's connections (asking for /metrics and reading nothing,
// or sending a request every two minutes), and the load balancers' /readyz
// and Prometheus' scrapes, from other addresses, then waited in the accept
// queue: every gateway out of rotation, and no metrics to alert on. Behind
// a proxy every browser has the proxy's address: 64 is some ten operators'
// consoles at once.
const maxConnectionsPerAddress = maxConnections / 4

// perAddressListener closes a connection whose address (clientPrefix)
// already holds maxConnectionsPerAddress, and logs that at WARN at most
// once a minute.
type perAddressListener struct {
	net.Listener
	log    *slog.Logger
	mu     sync.Mutex
	open   map[netip.Prefix]int
	logged time.Time
}

func newPerAddressListener(ln net.Listener, log *slog.Logger) *perAddressListener {
	return &perAddressListener{Listener: ln, log: log, open: map[netip.Prefix]int{}}
}

// Accept returns the next connection whose address holds fewer than
// maxConnectionsPerAddress; it closes the others meanwhile. Its errors are
// the listener's.
func (l *perAddressListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p, ok := clientPrefix(c.RemoteAddr().String())
		if !ok { // not an IP address (a Unix socket): not counted
			return c, nil
		}
		l.mu.Lock()
		if l.open[p] >= maxConnectionsPerAddress {
			warn := time.Since(l.logged) >= time.Minute
			if warn {
				l.logged = time.Now()
			}
			l.mu.Unlock()
			c.Close()
			if warn {
				l.log.Warn("admin listener: connections from one address refused", "address", p.String(),
					"held", maxConnectionsPerAddress, "why", "one address may hold at most a quarter of the listener's connections")
			}
			continue
		}
		l.open[p]++
		l.mu.Unlock()
		return &addressConn{Conn: c, release: func() { l.release(p) }}, nil
	}
}

func (l *perAddressListener) release(p netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[p]--; l.open[p] <= 0 {
		delete(l.open, p)
	}
}

// addressConn gives its address's place back when it is first closed.
type addressConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *addressConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
