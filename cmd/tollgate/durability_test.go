package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// natsOn starts a JetStream server on addr with its data in dir.
func natsOn(t *testing.T, dir, addr string) *server.Server {
	t.Helper()
	ns, err := meter.StartEmbedded(dir, addr, meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns.Server()
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// countEvents is how many events the ledger holds for the stack's customer.
func (s *stack) countEvents() int {
	rows, err := s.store.RecentEvents(context.Background(), s.customerID, 1000)
	if err != nil {
		s.t.Fatal(err)
	}
	return len(rows)
}

func (s *stack) waitEvents(n int, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for s.countEvents() != n {
		if time.Now().After(deadline) {
			s.t.Fatalf("ledger holds %d events, want %d", s.countEvents(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNATSOutageIsSpooledThenRepublished: while NATS is down the gateway
// keeps serving and spools; when NATS returns the spool drains and the
// ledger holds every request exactly once.
func TestNATSOutageIsSpooledThenRepublished(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	natsDir, addr := t.TempDir(), freeAddr(t)
	ns := natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	for range 5 {
		if code, _ := s.chatAs(s.secret); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
	}
	s.waitEvents(5, 10*time.Second)
	ns.Shutdown()
	ns.WaitForShutdown()
	for range 20 {
		if code, _ := s.chatAs(s.secret); code != http.StatusOK {
			t.Fatalf("with NATS down: status %d, want 200 (the spool meters)", code)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for n, _, _ := s.app.spool.Stats(); n != 20; n, _, _ = s.app.spool.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("spool holds %d events, want 20", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// serve stays ready (its gateway spools), and says what is down.
	code, body := get(t, s.admin+"/readyz")
	var rd readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil || code != http.StatusOK || !rd.Ready || rd.NATS != "disconnected" ||
		rd.Degraded["meter"] != "NATS is unreachable" || rd.Spool == nil || rd.Spool.Events != 20 || !rd.Spool.Accepting {
		t.Errorf("/readyz with NATS down = %d %s; want ready, NATS disconnected, the meter degraded, 20 events spooled", code, body)
	}
	natsOn(t, natsDir, addr) // NATS is back, with its stored stream
	s.waitEvents(25, 20*time.Second)
	if n, _, _ := s.app.spool.Stats(); n != 0 {
		t.Fatalf("spool still holds %d events", n)
	}
}

// TestSpoolSurvivesGatewayRestart: events spooled while NATS is down, and
// the stream cut off by a shutdown whose grace ran out, are in the ledger
// after the gateway starts again with NATS back.
func TestSpoolSurvivesGatewayRestart(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	natsDir, addr := t.TempDir(), freeAddr(t)
	ns := natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) {
		e.NATSURL, e.ShutdownGrace = "nats://"+addr, 300*time.Millisecond
	})
	ns.Shutdown()
	ns.WaitForShutdown()
	for range 10 {
		if code, _ := s.chatAs(s.secret); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
	}
	// A slow stream in flight when the gateway shuts down.
	slow := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions", strings.NewReader(chatBody(100, false, `"sim_delay_ms":"50"`)))
		req.Header.Set("Authorization", "Bearer "+s.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- ""
			return
		}
		slow <- resp.Header.Get("X-Request-Id")
		resp.Body.Close()
	}()
	time.Sleep(500 * time.Millisecond)
	natsOn(t, natsDir, addr)
	s.restart() // cuts the slow stream off; the new process republishes the spool
	id := <-slow
	s.waitEvents(11, 20*time.Second)
	e := s.event(id)
	if e.Status != usage.StatusCutOff || e.Usage.CompletionTokens <= 0 {
		t.Fatalf("cut-off stream's event = %+v, want cut_off with what was produced", e.Event)
	}
}

// TestCrashEstimateDoesNotOvertakeASpooledEvent: a request whose real event
// was spooled (NATS down) just before a crash, and whose end the crash
// journal had not yet recorded, is in both. At the next start the
// journal's estimate goes behind the spool, so the ledger keeps the real
// event (it keeps the first of an id), not the estimate.
func TestCrashEstimateDoesNotOvertakeASpooledEvent(t *testing.T) {
	s := newStack(t, nil)
	code, id := s.chatAs(s.secret)
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	seen := s.event(id).Event
	if err := s.app.close(); err != nil {
		t.Fatal(err)
	}
	s.app = nil
	// What the crashed process left: the request begun and checkpointed in
	// the journal, and its real event in the spool.
	real := seen
	real.ID = uuid.Must(uuid.NewV7()).String()
	real.RequestID, real.Time = "", time.Now().UTC()
	real.Status, real.UsageSource = usage.StatusOK, usage.SourceUpstream
	real.Usage = usage.Tokens{PromptTokens: 100, CompletionTokens: 900}
	j, _, err := journal.Open(filepath.Join(s.env.DataDir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	begun := real
	begun.Status, begun.UsageSource, begun.Usage = "", usage.SourceEstimated, usage.Tokens{}
	j.Begin(&begun, []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`))
	j.Checkpoint(real.ID, "some of the output", "", nil, false)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	sp, err := meter.OpenSpool(filepath.Join(s.env.DataDir, "spool"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Append(&real); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	s.restart()
	got := s.event(real.ID)
	if got.Status != usage.StatusOK || got.Usage != real.Usage {
		t.Fatalf("the ledger holds %s %+v for the request, want the spooled real event (ok, %+v)", got.Status, got.Usage, real.Usage)
	}
}

// TestReadinessTellsASpoolThatRefuses: while the gateway's spool refuses
// new events (here older than meter.spool_max_age, NATS down), serve is
// not ready (503), and /readyz says why: its gateway answers 503 to new
// requests, which a load balancer should send elsewhere.
func TestReadinessTellsASpoolThatRefuses(t *testing.T) {
	addr := freeAddr(t)
	ns := natsOn(t, t.TempDir(), addr)
	s := newStackEnv(t, func(c *fileConfig) { c.Meter.SpoolMaxAge = time.Millisecond }, func(e *env) { e.NATSURL = "nats://" + addr })
	ns.Shutdown()
	ns.WaitForShutdown()
	if code, _ := s.chatAs(s.secret); code != http.StatusOK {
		t.Fatalf("with NATS down and the spool empty: status %d, want 200 (the spool meters)", code)
	}
	var rd readiness
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := get(t, s.admin+"/readyz")
		if err := json.Unmarshal([]byte(body), &rd); err == nil && rd.Spool != nil && rd.Spool.Events == 1 && code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with an event spooled past spool_max_age = %d %s; want 503", code, body)
		}
	}
	if rd.Ready || rd.Spool.Accepting || !strings.Contains(rd.Spool.Refusal, "spool_max_age") || rd.Degraded["gateway"] == "" {
		t.Fatalf("/readyz with the spool refusing: %+v; want not ready, the spool not accepting and why, the gateway degraded", rd)
	}
}
