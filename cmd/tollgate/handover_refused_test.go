package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestHandOverRefusedForGoodSaysWhy: a hand-over whose store holds a
// message larger than the new NATS's max_payload (16 KiB here) fails at
// once, and /readyz says so, naming the message and the cause, with the
// time of the next attempt; it said "moving ..." for ever, resending the
// message in silence.
func TestHandOverRefusedForGoodSaysWhy(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	s := newStack(t, nil)
	s.strandedStore(3, "poison-refused")

	// A message of 40 KiB left in the store's usage stream.
	dir := filepath.Join(s.env.DataDir, "jetstream")
	e, err := meter.StartEmbedded(dir, "", meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := nats.Connect("", nats.InProcessServer(e))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(src)
	if err != nil {
		t.Fatal(err)
	}
	big := nats.NewMsg(meter.DefaultSubject)
	big.Data = []byte(strings.Repeat("x", 40<<10))
	big.Header.Set(nats.MsgIdHdr, "huge-event")
	if _, err := js.PublishMsg(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	src.Close()
	e.Shutdown()
	e.WaitForShutdown()

	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), MaxPayload: 16 << 10, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	s.env.NATSURL = ns.ClientURL()
	s.env.handOverRetry = [2]time.Duration{time.Hour, time.Hour}
	s.restart()
	got := waitHandOverState(t, s.app, roles{gateway: true, meter: true, admin: true},
		"failed (attempt 1)", "huge-event", "max_payload", meter.DefaultStreamName, "trying again at")
	t.Log(got)
	if ok, _ := meter.HasEmbeddedStore(dir); !ok {
		t.Fatal("the store was moved")
	}
}
