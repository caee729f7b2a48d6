package main

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestNATSCredentialsNotLogged (an operations review): a NATS server
// that authenticates by token takes it as the URL's user
// (TOLLGATE_NATS_URL=nats://TOKEN@host:4222), and url.URL.Redacted hides a
// password alone: the token was logged whole, at WARN while NATS was not
// reachable at start ("NATS: not reachable yet") and at INFO on every
// reconnection ("NATS: reconnected"). A URL whose password does not parse
// (a space not percent-encoded) stopped the process with the password in
// its error. The log and the error must name the server, not the secret.
func TestNATSCredentialsNotLogged(t *testing.T) {
	const secret = "s3cr3t-nats-token"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var logs metertest.LockedBuffer
	a := &app{log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	// NATS is not up yet: the process starts and retries.
	if _, err := a.connectNATS(env{NATSURL: "nats://" + secret + "@" + addr, DataDir: t.TempDir()}, roles{meter: true}, meter.SyncPolicy{}); err != nil {
		t.Fatal(err)
	}
	defer a.nc.Close()
	// NATS comes up, then restarts: the process connects, and reconnects.
	for i := range 2 {
		ns, err := meter.StartEmbedded(t.TempDir(), addr, meter.SyncPolicy{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { ns.Server().Shutdown(); ns.Server().WaitForShutdown() }()
		for deadline := time.Now().Add(20 * time.Second); !a.nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("not connected to NATS within 20 s")
			}
		}
		if i == 0 {
			ns.Server().Shutdown()
			ns.Server().WaitForShutdown()
		}
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "NATS: reconnected"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no connection to NATS logged within 20 s:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "NATS: not reachable yet") {
		t.Fatalf("the first, failed attempt was not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the NATS token is in the log:\n%s", logs.String())
	}

	b := &app{log: slog.New(slog.NewJSONHandler(&logs, nil))}
	_, err = b.connectNATS(env{NATSURL: "nats://tollgate:pass word@" + addr, DataDir: t.TempDir()}, roles{meter: true}, meter.SyncPolicy{})
	if err == nil {
		b.nc.Close()
		t.Fatal("a NATS URL that does not parse was taken")
	}
	if strings.Contains(err.Error(), "pass word") {
		t.Errorf("the NATS password is in the error: %v", err)
	}
}
