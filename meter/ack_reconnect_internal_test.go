package meter

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAcksStopAtTheFirstOneTheDroppedConnectionRefuses: a worker whose
// connection drops while it acknowledges a batch (after its gate let the
// batch through) sends no more of that batch's acknowledgements, and says
// so once. Tollgate's connection keeps no reconnect buffer
// (nats.ReconnectBufSize(-1)), so each ack sent while it reconnects fails
// at once: the loop went on through the batch (up to meter.batch_size,
// 6,000 by default), logging a WARN for every message, and, had the
// connection come back meanwhile, sent the rest to whatever server it had
// reached, which the gate had not checked (a usage stream made again
// there takes them as acks of its own events at those sequences).
//
// The gate is left nil here (it lets everything through) to stand for
// the moment between its check and the connection's loss.
func TestAcksStopAtTheFirstOneTheDroppedConnectionRefuses(t *testing.T) {
	e, _, _, _ := gateServer(t)
	// A connection as tollgate's: no reconnect buffer.
	nc, err := nats.Connect(e.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 50
	for i := range n {
		if _, err := js.Publish(ctx, DefaultSubject, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, DefaultStreamName, jetstream.ConsumerConfig{Durable: "ack-test", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != n {
		t.Fatalf("fetched %d messages; want %d", len(msgs), n)
	}

	e.Server().Shutdown()
	e.Server().WaitForShutdown()
	for deadline := time.Now().Add(10 * time.Second); !nc.IsReconnecting(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not start reconnecting within 10 s of its server's shutdown")
		}
	}
	var logs bytes.Buffer
	w := &Worker{cfg: WorkerConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	w.ack(ctx, msgs, "a batch written to the ledger")
	lines := strings.Count(logs.String(), "\n")
	if lines != 1 {
		t.Fatalf("%d log lines for one batch's acks refused by a dropped connection; want 1:\n%.2000s", lines, logs.String())
	}
	if !strings.Contains(logs.String(), "messages=50") {
		t.Errorf("the log line does not give the 50 messages not acknowledged:\n%s", logs.String())
	}
}
