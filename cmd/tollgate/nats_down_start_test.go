package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestGatewayStartsPromptlyWhileNATSIsDown: a gateway process started
// while NATS was unreachable kept its listener closed for the whole wait
// for the key buckets (keyLoadWait, 10 s), which NATS down could never end,
// though the gateway serves without NATS: keys are checked in the ledger
// and events spooled. A lone gateway restarted during a NATS outage
// refused every connection meanwhile (found by review). It now waits for
// the buckets only while NATS is connected: here, with a wait longer than
// the test may run, it must start, serve a request with a key the buckets
// never gave it, and spool its event, which reaches the ledger once NATS
// is back.
func TestGatewayStartsPromptlyWhileNATSIsDown(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	natsDir, addr := t.TempDir(), freeAddr(t)
	ns := natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	var k struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"outage"}`, http.StatusCreated, &k)
	ns.Shutdown()
	ns.WaitForShutdown()

	e := s.env
	e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	e.keyLoadWait = time.Hour
	type started struct {
		a   *app
		err error
	}
	done := make(chan started, 1)
	go func() {
		a, err := start(context.Background(), s.log, e, s.cfg, roles{gateway: true})
		done <- started{a, err}
	}()
	var g *app
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("a gateway started while NATS is down: %v", r.err)
		}
		g = r.a
	case <-time.After(time.Minute):
		t.Fatal("a gateway started while NATS is down has not started listening after a minute: " +
			"it waits for key buckets that NATS down cannot load")
	}
	t.Cleanup(func() { _ = g.close() })

	status, _, _, id := chatOn(t, "http://"+g.Addr, k.Key)
	if status != http.StatusOK {
		t.Fatalf("a request to the gateway started while NATS is down: %d, want 200 (its key from the ledger)", status)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _, _ := g.spool.Stats(); n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the gateway's spool holds %d events, want the request's 1", n)
		}
	}
	// It serves, but is not ready until its keys are loaded: /readyz says so.
	code, body := get(t, "http://"+g.AdminAddr+"/readyz")
	var rd readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil || code != http.StatusServiceUnavailable || rd.Ready ||
		rd.Keys != "not loaded" || rd.Degraded["gateway"] == "" {
		t.Errorf("/readyz of the gateway started while NATS is down = %d %s; want 503, the keys not loaded", code, body)
	}
	natsOn(t, natsDir, addr) // NATS is back, with its stored stream
	if ev := s.event(id); ev.Usage.CompletionTokens != 4 {
		t.Errorf("the event of the request served while NATS was down: %+v", ev.Usage)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, body = get(t, "http://"+g.AdminAddr+"/readyz"); code == http.StatusOK {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("/readyz 30 s after NATS came back = %d %s; want ready, its keys loaded", code, body)
		}
	}
}
