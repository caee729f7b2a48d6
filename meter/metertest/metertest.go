// Package metertest gives tests a real NATS server with JetStream, embedded
// in the test process with its storage in the test's temporary directory,
// shut down when the test ends.
package metertest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// NewServer starts an embedded JetStream server on a random loopback port.
func NewServer(t testing.TB) *server.Server {
	t.Helper()
	s, err := meter.StartEmbedded(t.TempDir(), "127.0.0.1:0", meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatalf("metertest: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s.Server
}

// Connect connects to s and returns a JetStream handle; the connection
// closes when the test ends.
func Connect(t testing.TB, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("metertest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("metertest: jetstream: %v", err)
	}
	return js
}
