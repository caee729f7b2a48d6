package main

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestARestartedGatewayCountsItsChargesWhileTheMeterIsDown: a gateway
// counts a key's charges since its last state until the meter's next
// state holds them; with the meter down no state comes, and a gateway
// restarted then spent the key's daily limit again, once a restart (a
// spend-limits review: $0.02 on a $0.005 limit after three restarts). Its
// crash journal now keeps the charges: the key it had spent is refused
// after the restart too.
func TestARestartedGatewayCountsItsChargesWhileTheMeterIsDown(t *testing.T) {
	t.Parallel()
	natsDir, addr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	_, _, key := s.customer(`{"name":"restarts"}`, `{"name":"k","daily_limit":"0.001"}`)
	s.refreshKeys()
	if err := s.app.close(); err != nil { // the meter with it: no newer state of the key comes
		t.Fatal(err)
	}
	s.app = nil
	e := s.env
	e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	gateway := func() *app {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g, err := start(ctx, s.log, e, s.cfg, roles{gateway: true})
		if err != nil {
			t.Fatal(err)
		}
		s.gateway = "http://" + g.Addr
		return g
	}
	g := gateway()
	served := 0
	for {
		code, _ := s.chatAs(key)
		if code != http.StatusOK {
			if code != http.StatusPaymentRequired {
				t.Fatalf("after %d served: %d, want 402 once the limit is spent", served, code)
			}
			break
		}
		if served++; served > 50 {
			t.Fatal("50 requests of about $0.00026 served on a $0.001 daily limit")
		}
	}
	if err := g.close(); err != nil {
		t.Fatal(err)
	}
	g = gateway()
	t.Cleanup(func() { _ = g.close() })
	if code, _ := s.chatAs(key); code != http.StatusPaymentRequired {
		t.Fatalf("%d served spent the $0.001 daily limit; after the gateway's restart, the meter still down: %d, want 402", served, code)
	}
}
