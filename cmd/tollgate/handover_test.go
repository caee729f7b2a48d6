package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// streamChat sends a streaming chat completion, reads it to its end and
// returns the request id; it fails the test unless the answer is 200.
func (s *stack) streamChat() string {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions", strings.NewReader(chatBody(8, true, "")))
	req.Header.Set("Authorization", "Bearer "+s.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	return resp.Header.Get("X-Request-Id")
}

// strandedStore runs `tollgate serve` with its embedded JetStream in s as
// it does while Postgres is down: a message the meter cannot read set
// aside in the dead-letter stream (its event id poisonID), then the meter
// stopped, and n streamed requests served, their events durable in the
// embedded usage stream and not in the ledger. It closes the app and
// returns the request ids.
func (s *stack) strandedStore(n int, poisonID string) []string {
	s.t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		s.t.Fatal(err)
	}
	poison := nats.NewMsg(meter.DefaultSubject)
	poison.Data = []byte("not an event")
	poison.Header.Set(nats.MsgIdHdr, poisonID)
	if _, err := js.PublishMsg(ctx, poison); err != nil {
		s.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if l, _ := s.app.dlq.List(ctx, 0, 10); len(l) == 1 {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatal("the poison message was not set aside")
		}
	}
	if err := s.app.worker.Stop(ctx); err != nil { // Postgres down: the events wait in the stream
		s.t.Fatal(err)
	}
	var ids []string
	for range n {
		ids = append(ids, s.streamChat())
	}
	if got := s.countEvents(); got != 0 {
		s.t.Fatalf("the ledger holds %d events before the switch, want 0", got)
	}
	if err := s.app.close(); err != nil {
		s.t.Fatal(err)
	}
	s.app = nil
	return ids
}

// waitHandedOver waits until the data directory's jetstream store is gone
// and one jetstream.handed-over-* directory holds it.
func waitHandedOver(t *testing.T, dataDir string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		moved, _ := filepath.Glob(filepath.Join(dataDir, "jetstream.handed-over-*"))
		_, err := os.Stat(filepath.Join(dataDir, "jetstream"))
		if len(moved) == 1 && os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store not handed over: jetstream: %v; handed over: %v", err, moved)
		}
	}
}

// TestSwitchToExternalNATSHandsOverTheEmbeddedStore: `tollgate serve`
// switched from its embedded JetStream to an external NATS (its stream the
// same name) writes the events the embedded store held, and not yet the
// ledger, exactly once, and keeps its dead letter with the reason; the
// store is renamed, and the log says what moved where.
func TestSwitchToExternalNATSHandsOverTheEmbeddedStore(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	logs := &syncBuffer{}
	s := newStackLogs(t, nil, nil, logs)
	ids := s.strandedStore(100, "poison-before-the-switch")

	addr := freeAddr(t)
	natsOn(t, t.TempDir(), addr)
	s.env.NATSURL = "nats://" + addr
	s.restart()
	s.waitEvents(100, 30*time.Second)
	for _, id := range ids {
		s.event(id)
	}
	waitHandedOver(t, s.env.DataDir, 10*time.Second)
	letters, err := s.app.dlq.List(context.Background(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].EventID != "poison-before-the-switch" || letters[0].Reason == "" || letters[0].Data != "not an event" {
		t.Fatalf("dead letters on the external NATS: %+v, want the poison message with its reason", letters)
	}
	if !strings.Contains(logs.String(), `"usage_events":100`) || !strings.Contains(logs.String(), `"dead_letters":1`) {
		t.Fatalf("no log line says what was handed over:\n%s", logs)
	}
	// Started again, the process finds nothing more to hand over.
	s.restart()
	time.Sleep(500 * time.Millisecond)
	if got := s.countEvents(); got != 100 {
		t.Fatalf("the ledger holds %d events after a second start, want 100", got)
	}
}

// TestMeterHandsOverOnceNATSIsReachable: a `tollgate meter` given a NATS
// that is not up yet starts anyway, and hands the embedded store over once
// the NATS is up.
func TestMeterHandsOverOnceNATSIsReachable(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	s := newStack(t, nil)
	s.strandedStore(20, "poison-meter")

	addr := freeAddr(t)
	e := s.env
	e.NATSURL, e.AdminListen = "nats://"+addr, "127.0.0.1:0"
	a, err := start(context.Background(), s.log, e, s.cfg, roles{meter: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	s.store = a.store
	if _, err := os.Stat(filepath.Join(e.DataDir, "jetstream")); err != nil {
		t.Fatalf("the store was moved before NATS was up: %v", err)
	}
	// /readyz says the store waits to be handed over, and the wait does
	// not make the process unready for it.
	if rd := a.readiness(context.Background(), roles{meter: true}); !strings.HasPrefix(rd.HandOver, "waiting for NATS") {
		t.Errorf("/readyz while NATS is down: embedded_store_hand_over %q; want the wait told", rd.HandOver)
	}
	natsOn(t, t.TempDir(), addr)
	s.waitEvents(20, 30*time.Second)
	waitHandedOver(t, e.DataDir, 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rd := a.readiness(context.Background(), roles{meter: true})
		if rd.HandOver == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the hand-over: embedded_store_hand_over %q; want none", rd.HandOver)
		}
	}
}

// TestNoHandOverOfALiveEmbeddedStore: a `tollgate meter` given a NATS URL
// and the data directory of a running `tollgate serve` with its embedded
// JetStream leaves that store alone.
func TestNoHandOverOfALiveEmbeddedStore(t *testing.T) {
	logs := &syncBuffer{}
	s := newStackLogs(t, nil, nil, logs)
	addr := freeAddr(t)
	natsOn(t, t.TempDir(), addr)
	e := s.env
	e.NATSURL, e.AdminListen = "nats://"+addr, "127.0.0.1:0"
	a, err := start(context.Background(), s.log, e, s.cfg, roles{meter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "not by this process"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line says the store is left alone:\n%s", logs)
		}
	}
	if _, err := os.Stat(filepath.Join(e.DataDir, "jetstream")); err != nil {
		t.Fatalf("the live store was moved: %v", err)
	}
	s.streamChat() // serve still meters into it
	s.waitEvents(1, 10*time.Second)
}
