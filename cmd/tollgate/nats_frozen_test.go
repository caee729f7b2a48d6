package main

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// freezableProxy forwards TCP connections on a loopback port to backend;
// while frozen it forwards nothing, as a NATS server paused (SIGSTOP, a
// VM's stall) or cut off by a partition that drops packets: the
// connection stays open, and nothing comes back.
type freezableProxy struct {
	ln     net.Listener
	frozen atomic.Bool
}

func startFreezableProxy(t *testing.T, backend string) *freezableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); b.Close() })
			go p.pipe(b, c)
			go p.pipe(c, b)
		}
	}()
	return p
}

// pipe copies src to dst, holding what it read while the proxy is frozen.
func (p *freezableProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestNATSLeavesAFrozenServer (a review): a process's NATS connection must
// leave a server that stops answering without closing the connection (a
// node of the cluster paused, or cut off by a partition that drops
// packets) for another of TOLLGATE_NATS_URL's. With nats.go's default
// ping interval, 2 minutes, the gateways stayed on a node paused for 90 s,
// its two peers up: every request waited the 2 s publish timeout at its
// end (3 s for a 1 s stream), throughput fell by 60%, and every event
// went to the spool, for as long as the pause (minutes before nats.go
// would have given up on the server).
func TestNATSLeavesAFrozenServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ns, err := meter.StartEmbedded(t.TempDir(), addr, meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Server().Shutdown(); ns.Server().WaitForShutdown() })
	// Two routes to the one server stand for two nodes of a cluster.
	proxies := []*freezableProxy{startFreezableProxy(t, addr), startFreezableProxy(t, addr)}
	var urls []string
	for _, p := range proxies {
		urls = append(urls, "nats://"+p.ln.Addr().String())
	}
	a := &app{log: slog.New(slog.DiscardHandler)}
	if _, err := a.connectNATS(env{NATSURL: strings.Join(urls, ","), DataDir: t.TempDir()}, roles{gateway: true}, meter.SyncPolicy{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.nc.Close)
	for deadline := time.Now().Add(20 * time.Second); !a.nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not connected to NATS within 20 s")
		}
	}
	on := -1
	for i, u := range urls {
		if a.nc.ConnectedUrl() == u {
			on = i
		}
	}
	if on < 0 {
		t.Fatalf("connected to %s, none of %v", a.nc.ConnectedUrl(), urls)
	}
	proxies[on].frozen.Store(true)
	frozenAt := time.Now()
	for deadline := frozenAt.Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if a.nc.IsConnected() && a.nc.ConnectedUrl() != urls[on] && a.nc.FlushTimeout(time.Second) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still on %s, frozen %s ago (connected: %v)", urls[on], time.Since(frozenAt).Round(time.Second), a.nc.IsConnected())
		}
	}
	t.Logf("left the frozen server for %s after %s", a.nc.ConnectedUrl(), time.Since(frozenAt).Round(time.Second))
}
