package meter_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestServiceRecreatesTheStreamAfterTheStoreIsLost: NATS restarted
// without its store (a lost volume) came back with no usage stream and no
// consumer. The meter's subscription saw only missed heartbeats, logged
// nothing and waited for good; the gateways spooled every event until the
// meter was restarted (a crash review: 315 events). The service checks
// its consumer when heartbeats stop, and sets the stream and the consumer
// up again when they are gone.
func TestServiceRecreatesTheStreamAfterTheStoreIsLost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	startServer := func() *meter.Embedded {
		e, err := meter.StartEmbedded(t.TempDir(), addr, meter.SyncPolicy{}, nil) // a new, empty store each time
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	srv := startServer()
	nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store := ledgertest.NewStore(t)
	svc := meter.NewService(js, store, meter.WorkerConfig{AckWait: 5 * time.Second})
	svc.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = svc.Stop(ctx)
		srv.Shutdown()
	}()
	customer := uuid.NewString()
	publish := func(deadline time.Duration) {
		t.Helper()
		pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
			KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: 10, CompletionTokens: 1}}
		var err error
		for end := time.Now().Add(deadline); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = pub.Publish(ctx, &e)
			cancel()
			if err == nil {
				return
			}
		}
		t.Fatalf("publish: %v (the usage stream was not set up again)", err)
	}
	publish(10 * time.Second)
	waitUsage(t, store, customer, 1)

	srv.Shutdown()
	srv.WaitForShutdown()
	srv = startServer() // the same address, its store lost
	publish(30 * time.Second)
	waitUsage(t, store, customer, 2)
}
