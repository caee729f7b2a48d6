package meter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureStreamNamesAMissingJetStream: on a NATS server without
// JetStream (nats-server run without -js) every JetStream request gets "no
// responders", which the meter logged as "waiting for NATS" while NATS was
// connected. The error must say that JetStream is what is missing.
func TestEnsureStreamNamesAMissingJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = EnsureStream(ctx, js, StreamConfig{})
	if err == nil || !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "enable JetStream") {
		t.Fatalf("EnsureStream on a server without JetStream: %v; want no responders, and a hint to enable JetStream", err)
	}
	_, err = NewWorker(ctx, js, nil, WorkerConfig{})
	if err == nil || !strings.Contains(err.Error(), "enable JetStream") {
		t.Fatalf("NewWorker on a server without JetStream: %v; want a hint to enable JetStream", err)
	}
}
