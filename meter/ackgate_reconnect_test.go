package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAWorkerAcknowledgesAgainAfterNATSRestartsWithItsStore: the ack
// gate holds a worker's acknowledgements back after each reconnect until
// it has seen the usage stream is still the one it was set up on. NATS
// restarted with its store (the embedded server's heal, in process as
// `tollgate serve` connects, or over TCP as `tollgate meter` does) keeps
// the stream, and the worker must acknowledge again at once: a gate that
// stayed shut would leave every event to its ack wait and a redelivery,
// which the ledger's counts do not show (it drops the duplicates), so the
// test reads the consumer: nothing pending acknowledgement within seconds
// of a 30 s ack wait, nothing redelivered.
func TestAWorkerAcknowledgesAgainAfterNATSRestartsWithItsStore(t *testing.T) {
	t.Run("in process", func(t *testing.T) {
		e, err := meter.StartEmbedded(t.TempDir(), "", meter.SyncPolicy{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
		testAcksAfterRestart(t, e, nats.InProcessServer(e))
	})
	t.Run("tcp", func(t *testing.T) {
		e, err := meter.StartEmbedded(t.TempDir(), "127.0.0.1:0", meter.SyncPolicy{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
		url := e.ClientURL()
		testAcksAfterRestart(t, e, func(o *nats.Options) error { o.Servers = []string{url}; return nil })
	})
}

func testAcksAfterRestart(t *testing.T, e *meter.Embedded, conn nats.Option) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := nats.Connect("", conn, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	store := ledgertest.NewStore(t)
	const n = 5
	cfg := meter.WorkerConfig{BatchSize: n, BatchWait: 20 * time.Millisecond, WriteLanes: 1, AckWait: 30 * time.Second}
	done := metertest.StartWorker(t, ctx, js, store, cfg)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer := uuid.NewString()
	publishFor(t, ctx, pub, customer, n, 0)
	waitUsage(t, store, customer, n)
	waitAcked(t, ctx, js, n, 5*time.Second)

	reconnects := nc.Stats().Reconnects
	if err := e.Restart(false); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); nc.Stats().Reconnects == reconnects || !nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not reconnect to the restarted server")
		}
	}
	publishFor(t, ctx, pub, customer, n, 0)
	waitUsage(t, store, customer, 2*n)
	waitAcked(t, ctx, js, 2*n, 5*time.Second)
	select {
	case err := <-done:
		t.Fatalf("the worker stopped (%v); want it to go on with the stream it was set up on", err)
	default:
	}
}

// publishFor publishes n events of customer, each retried for up to
// retryFor (a usage stream being set up again) before the test fails.
func publishFor(t *testing.T, ctx context.Context, pub *meter.Publisher, customer string, n int, retryFor time.Duration) {
	t.Helper()
	for range n {
		ev := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
			KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		for end := time.Now().Add(retryFor); ; time.Sleep(100 * time.Millisecond) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err := pub.Publish(pctx, &ev)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("publish: %v", err)
			}
		}
	}
}

// waitAcked waits up to within for the usage consumer to have every event
// up to stream sequence want acknowledged, none pending and none
// redelivered: the ledger's counts cannot tell an acknowledgement held
// back (it drops the redelivery), the consumer can.
func waitAcked(t *testing.T, ctx context.Context, js jetstream.JetStream, want uint64, within time.Duration) {
	t.Helper()
	var ci *jetstream.ConsumerInfo
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter"); err == nil {
			if ci, err = c.Info(ctx); err == nil && ci.AckFloor.Stream == want && ci.NumAckPending == 0 && ci.NumRedelivered == 0 {
				return
			}
		}
	}
	if ci == nil {
		t.Fatal("the usage consumer did not answer")
	}
	t.Fatalf("consumer: ack floor %d, %d pending acknowledgement, %d redelivered; want all %d events acknowledged within %s, "+
		"none redelivered: the worker's acknowledgements are held back", ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered, want, within)
}
