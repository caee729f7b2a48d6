package gateway_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestStartAfterStopIsRefused: a Server stopped before it started refuses
// to start, and one started refuses a second Start, each with an error,
// and nothing is left listening or running. A lifecycle review: Stop
// before Start used up the server's one stop, so that a Start after it
// served on a listener no Stop could ever close (its goroutines and port
// held until the process ended); a second Start opened a second listener
// the one Stop did not close.
func TestStartAfterStopIsRefused(t *testing.T) {
	cfg, _ := simConfig(t)
	before := goleak.IgnoreCurrent()
	deps := gateway.Deps{Providers: providers(), Keys: keys{}, Sink: &memSink{}, Journal: &memJournal{}}

	stopped, err := gateway.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of a server never started: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := stopped.Start(addr, nil); err == nil {
		t.Errorf("Start after Stop = nil, want an error")
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("a server started after its Stop listens on %s, and no Stop can close it", addr)
		}
	}

	twice, err := gateway.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := twice.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	first := twice.Addr()
	if err := twice.Start("127.0.0.1:0", nil); err == nil {
		t.Errorf("a second Start = nil, want an error")
	}
	stop := make(chan error, 1)
	go func() { stop <- twice.Stop(context.Background()) }()
	select {
	case err := <-stop:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Stop of a server started twice has not returned in 10 s (it waits for the first listener, which it never closes)")
	}
	if c, err := net.Dial("tcp", first); err == nil {
		c.Close()
		t.Errorf("%s still listens after Stop", first)
	}
	if err := goleak.Find(before, goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http/httptest.(*Server).goServe")); err != nil {
		t.Errorf("goroutines outlived Stop:\n%v", err)
	}
}
