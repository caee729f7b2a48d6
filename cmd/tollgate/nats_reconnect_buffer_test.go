package main

import (
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestNATSBuffersNothingWhileReconnecting: a process's NATS connection
// sends nothing it was given while reconnecting to the server it reaches
// next. nats.go buffers such publishes (8 MiB by default) and sends them
// once it reconnects, to whichever server that is: a meter worker's
// acknowledgement of a batch of a usage stream since deleted and made
// again would acknowledge the new stream's events at those sequences
// (meter's ackGate; JetStream takes an ack by sequence alone), and a
// gateway's publish waited its whole publish timeout for a PubAck before
// its event was spooled. With the buffer off, such a publish fails at
// once: the ack is not sent (the batch is delivered again, and the ledger
// drops it), and the event goes to the spool.
func TestNATSBuffersNothingWhileReconnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	ns, err := meter.StartEmbedded(dir, addr, meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{log: slog.New(slog.DiscardHandler)}
	if _, err := a.connectNATS(env{NATSURL: "nats://" + addr, DataDir: t.TempDir()}, roles{gateway: true}, meter.SyncPolicy{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.nc.Close)
	for deadline := time.Now().Add(20 * time.Second); !a.nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not connected to NATS within 20 s")
		}
	}
	ns.Server().Shutdown()
	ns.Server().WaitForShutdown()
	for deadline := time.Now().Add(10 * time.Second); !a.nc.IsReconnecting(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not start reconnecting within 10 s of its server's shutdown")
		}
	}
	err = a.nc.Publish("tollgate.test.while-reconnecting", []byte("an ack, say"))
	if !errors.Is(err, nats.ErrReconnectBufExceeded) {
		t.Fatalf("publish while reconnecting: %v; want nats.ErrReconnectBufExceeded (buffered, it would go to the next server)", err)
	}

	// Once reconnected, the connection publishes again.
	ns2, err := meter.StartEmbedded(dir, addr, meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns2.Server().Shutdown(); ns2.Server().WaitForShutdown() })
	for deadline := time.Now().Add(20 * time.Second); !a.nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("did not reconnect within 20 s of the server's restart")
		}
	}
	if err := a.nc.Publish("tollgate.test.reconnected", []byte("x")); err != nil {
		t.Fatalf("publish once reconnected: %v", err)
	}
}
