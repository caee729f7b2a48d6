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
	publish := func() {
		t.Helper()
		for range n {
			ev := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
				KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
				Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
			if err := pub.Publish(ctx, &ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	acked := func(want uint64) {
		t.Helper()
		var ci *jetstream.ConsumerInfo
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			c, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
			if err != nil {
				continue
			}
			if ci, err = c.Info(ctx); err == nil && ci.AckFloor.Stream == want && ci.NumAckPending == 0 {
				break
			}
		}
		if ci == nil {
			t.Fatal("the consumer did not answer")
		}
		if ci.AckFloor.Stream != want || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
			t.Fatalf("consumer: ack floor %d, %d pending acknowledgement, %d redelivered; want every one of the %d events acknowledged within 5 s (ack wait 30 s), none redelivered: "+
				"the worker's acknowledgements are held back",
				ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered, want)
		}
	}
	publish()
	waitUsage(t, store, customer, n)
	acked(n)

	reconnects := nc.Stats().Reconnects
	if err := e.Restart(false); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); nc.Stats().Reconnects == reconnects || !nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not reconnect to the restarted server")
		}
	}
	publish()
	waitUsage(t, store, customer, 2*n)
	acked(2 * n)
	select {
	case err := <-done:
		t.Fatalf("the worker stopped (%v); want it to go on with the stream it was set up on", err)
	default:
	}
}
