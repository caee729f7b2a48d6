package meter

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAckAfterReconnectAsksWhoseConsumer: a worker whose connection to
// NATS came back acknowledges what it holds only once JetStream says its
// consumer is still the one it set up: after NATS restarted with its
// store, it is, and the acknowledgements are sent; after NATS came back
// without its store and the stream and consumer were made again (events
// 1-41 delivered to another worker), they would acknowledge those, and
// are not sent. The worker here does not run, so nothing but the ack
// path itself can tell.
func TestAckAfterReconnectAsksWhoseConsumer(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := func(dir string) *Embedded {
		t.Helper()
		e, err := StartEmbedded(dir, addr, SyncPolicy{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
		return e
	}
	connect := func() (*nats.Conn, jetstream.JetStream) {
		t.Helper()
		nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	publish := func(js jetstream.JetStream, n int) {
		t.Helper()
		for range n {
			if _, err := js.Publish(ctx, DefaultSubject, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
	}
	fetch := func(c jetstream.Consumer, n int) []jetstream.Msg {
		t.Helper()
		var out []jetstream.Msg
		for len(out) < n {
			b, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range b.Messages() {
				out = append(out, m)
			}
			if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				t.Fatal(err)
			}
		}
		return out
	}
	reconnected := func(nc *nats.Conn, n uint64) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); nc.Stats().Reconnects < n || nc.Status() != nats.CONNECTED; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the worker's connection did not come back (%d reconnects, %v)", nc.Stats().Reconnects, nc.Status())
			}
		}
	}
	ackPending := func(c jetstream.Consumer) int {
		t.Helper()
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.NumAckPending
	}

	dir := t.TempDir()
	srv := start(dir)
	nc, js := connect()
	if _, err := EnsureStream(ctx, js, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(ctx, js, nil, WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	publish(js, 50)
	held := fetch(w.cons, 50)

	// NATS restarts with its store: the consumer is the worker's still.
	srv.Shutdown()
	srv.WaitForShutdown()
	srv = start(dir)
	reconnected(nc, 1)
	w.ack(ctx, held[:10])
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := held[10].DoubleAck(ctx); err != nil { // after the ten above, in the consumer's queue
		t.Fatal(err)
	}
	if n := ackPending(w.cons); n != 39 {
		t.Fatalf("%d events unacknowledged after a restart of NATS with its store, want 39: the worker's acknowledgements were not sent", n)
	}

	// NATS comes back without its store; another worker makes the stream
	// and the consumer again, and is delivered 41 new events.
	srv.Shutdown()
	srv.WaitForShutdown()
	start(t.TempDir())
	reconnected(nc, 2)
	_, other := connect()
	if _, err := EnsureStream(ctx, other, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	a, err := NewWorker(ctx, other, nil, WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	publish(other, 41)
	heldByA := fetch(a.cons, 41)
	w.ack(ctx, held[11:])
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := heldByA[40].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ackPending(a.cons); n != 40 {
		t.Fatalf("%d of the new stream's events unacknowledged, want 40: the old stream's acknowledgements acknowledged them", n)
	}
}
