package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// tcpProxy forwards connections to a server until cut, when it closes
// them all and refuses new ones, as a Postgres outage looks to a client.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// TestReadyThroughPostgresOutage: in serve mode, while Postgres is down,
// the process stays ready (it serves from its key cache and meters into
// JetStream); the database shows as a component, and the meter and admin
// roles as degraded. The request served meanwhile lands once it is back.
func TestReadyThroughPostgresOutage(t *testing.T) {
	var proxy *tcpProxy
	var direct string
	s := newStackEnv(t, nil, func(e *env) {
		direct = e.DatabaseURL
		u, _ := url.Parse(e.DatabaseURL)
		proxy = newTCPProxy(t, u.Host)
		u.Host = proxy.ln.Addr().String()
		e.DatabaseURL = u.String()
	})
	proxy.cut()
	code, body := get(t, s.admin+"/readyz")
	var rd readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil || code != 200 || !rd.Ready || rd.Database == "ok" ||
		rd.Degraded["meter"] == "" || rd.Degraded["admin"] == "" || rd.Degraded["gateway"] != "" {
		t.Fatalf("/readyz during the outage = %d %s; want 200, ready, the database down, meter and admin degraded", code, body)
	}
	// With no traffic, only this gauge tells Prometheus (TollgateDatabaseDown).
	if _, m := get(t, s.admin+"/metrics"); !strings.Contains(m, "\ntollgate_database_up 0\n") {
		t.Errorf("/metrics during the outage has no tollgate_database_up 0:\n%s", seriesLines(m, "tollgate_database_up"))
	}
	_, id := s.chatAs(s.secret)
	// The meter worker, given the request's event, says why it cannot
	// write it (an operations review: a worker whose writes failed looked
	// healthy).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body := get(t, s.admin+"/readyz")
		if json.Unmarshal([]byte(body), &rd) == nil && strings.Contains(rd.Degraded["meter"], "writes to the ledger fail") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz while the meter cannot write the request's event: %s; want degraded.meter naming the failing writes", body)
		}
	}
	proxy.restore()
	if _, m := get(t, s.admin+"/metrics"); !strings.Contains(m, "\ntollgate_database_up 1\n") {
		t.Errorf("/metrics once Postgres is back has no tollgate_database_up 1:\n%s", seriesLines(m, "tollgate_database_up"))
	}
	store, err := ledger.Open(context.Background(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := store.Event(context.Background(), id); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request served during the outage (%s) never reached the ledger", id)
		}
	}
	code, body = get(t, s.admin+"/readyz")
	var after readiness
	if code != 200 || json.Unmarshal([]byte(body), &after) != nil || after.Database != "ok" || len(after.Degraded) != 0 {
		t.Fatalf("/readyz after the outage = %d %s", code, body)
	}
}

// TestEventAtStopLandsAtOnce: a request answered just as serve stops has
// its event in the ledger within moments of the next start, not after the
// ack wait: the stopping worker wrote or handed back all it was sent.
func TestEventAtStopLandsAtOnce(t *testing.T) {
	for i := range 3 {
		s := newStack(t, nil)
		_, id := s.chatAs(s.secret)
		s.restart()
		start := time.Now()
		s.event(id)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("round %d: the event landed %v after the restart (ack_wait is 30s)", i, took)
		}
	}
}

// seriesLines is the lines of a /metrics body that name the series name.
func seriesLines(body, name string) string {
	var out []string
	for l := range strings.Lines(body) {
		if strings.Contains(l, name) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}
