package meter

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BenchmarkAckGateLive is what the ack gate adds to each acknowledged part
// of a batch on the hot path: the check that the connection is up and has
// not reconnected since the stream was last seen (no request).
func BenchmarkAckGateLive(b *testing.B) {
	e, err := StartEmbedded(b.TempDir(), "127.0.0.1:0", SyncPolicy{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Shutdown()
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	stream, err := EnsureStream(ctx, js, StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	g := newAckGate(nc, stream, nc.Stats().Reconnects, slog.Default())
	for b.Loop() {
		if !g.live(ctx) {
			b.Fatal("the gate holds back the acknowledgements of a stream that is there")
		}
	}
}

// noStore is a Store for a worker given no events: it writes nothing.
type noStore struct{}

func (noStore) WriteEvents(context.Context, []usage.Event) (int, error) { return 0, nil }

// TestARunWhoseStreamIsReplacedEnds: once its gate finds the usage stream
// replaced, a worker's Run ends with errStreamReplaced, so that the
// service sets a worker up on the stream there is, even when its consumer
// is there to be read (made again by another meter). Were the error
// retried as a failure to consume, each new subscription would end at
// once on the gate, for ever: Run would never end, and nothing be written.
func TestARunWhoseStreamIsReplacedEnds(t *testing.T) {
	e, err := StartEmbedded(t.TempDir(), "127.0.0.1:0", SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := EnsureStream(ctx, js, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(ctx, js, noStore{}, WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.gate.replace("a test")
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, errStreamReplaced) {
			t.Fatalf("Run: %v; want errStreamReplaced", err)
		}
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("Run went on 10 s after its stream was replaced; want it to end with errStreamReplaced")
	}
}

// TestTheGateTakesTheStreamsDeletionAdvisory: JetStream's advisory of the
// usage stream's deletion replaces a watching gate at once, with no
// acknowledgement asking first. Every other test of the gate passed with
// the advisory's subject misspelt (the consumer's loss, or a reconnect,
// caught the deletion there); without it, a deletion made while a worker
// stays connected is learned only from its consumer's loss, which can
// come late (docs/operations.md).
func TestTheGateTakesTheStreamsDeletionAdvisory(t *testing.T) {
	e, err := StartEmbedded(t.TempDir(), "127.0.0.1:0", SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	stream, err := EnsureStream(ctx, js, StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g := newAckGate(nc, stream, nc.Stats().Reconnects, slog.Default())
	defer g.watch()()
	if err := nc.Flush(); err != nil { // the subscription is the server's
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, DefaultStreamName); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done():
	case <-time.After(5 * time.Second):
		t.Fatal("the gate was not replaced within 5 s of the usage stream's deletion: its advisory did not reach it")
	}
	if g.live(ctx) {
		t.Error("the gate lets acknowledgements through after the stream's deletion")
	}
}
