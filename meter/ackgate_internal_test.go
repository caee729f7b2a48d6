package meter

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
