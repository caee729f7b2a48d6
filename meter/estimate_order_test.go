package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestWorkerCommitsTheExactEventBeforeACrashedEstimate: a request's exact
// event is in the stream, delivered to a worker that has not written it
// (it died, or waits out a Postgres outage), when the gateway's crash
// recovery publishes a crashed estimate under the same id, after the
// stream's duplicate window (1 s here), so JetStream keeps both. Another
// worker gets the estimate first; the exact event comes back to it only
// later (Nak). The ledger keeps the first event of an id it commits, so
// the worker must not commit the estimate while an event stored more than
// the window before it is not acknowledged: the exact event is billed,
// the estimate dropped.
func TestWorkerCommitsTheExactEventBeforeACrashedEstimate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, js, _, cfg, pub := estimateRig(t, ctx)
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	exact := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(),
		KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
		Usage: usage.Tokens{PromptTokens: 1000, CompletionTokens: 321}}
	if err := pub.Publish(ctx, &exact); err != nil {
		t.Fatal(err)
	}
	held := fetchOne(t, cons) // the first worker takes the exact event and does not write it

	time.Sleep(1500 * time.Millisecond) // past the duplicate window: JetStream keeps the estimate
	estimate := exact
	estimate.Status, estimate.HTTPStatus, estimate.UsageSource = usage.StatusCrashed, 200, usage.SourceEstimated
	estimate.Usage = usage.Tokens{PromptTokens: 900, CompletionTokens: 50}
	estimate.Error = "the gateway process stopped mid-request (a crash or a kill); usage estimated"
	if err := pub.Publish(ctx, &estimate); err != nil {
		t.Fatal(err)
	}

	// A second worker gets the estimate (delivered past the exact event),
	// and only then is the exact event handed back.
	done := metertest.StartWorker(t, ctx, js, store, cfg)
	waitConsumer(t, cons, "the estimate delivered", func(ci *jetstream.ConsumerInfo) bool { return ci.Delivered.Stream >= 2 })
	if err := held.Nak(); err != nil {
		t.Fatal(err)
	}
	waitConsumer(t, cons, "both events acknowledged", func(ci *jetstream.ConsumerInfo) bool {
		return ci.AckFloor.Stream >= 2 && ci.NumAckPending == 0 && ci.NumPending == 0
	})

	got, err := store.Event(ctx, exact.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != usage.StatusOK || got.Usage.PromptTokens != 1000 || got.Usage.CompletionTokens != 321 {
		t.Fatalf("ledger holds %s %+v for the request, want the exact event (ok, 1000+321 tokens), not the crashed estimate",
			got.Status, got.Usage)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestWorkerWritesAnEstimateWithinTheWindowAtOnce: an estimate published
// within the duplicate window of every event not yet acknowledged cannot
// have an exact event left unwritten (JetStream would have dropped it), so
// it is written at once, whatever is not acknowledged before it. Holding
// every estimate until the ack floor reached it made the estimates of a
// crash, spread over several workers, go in one at a time (a fault run's
// kill phases took minutes to settle).
func TestWorkerWritesAnEstimateWithinTheWindowAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{AckWait: time.Minute}
	if _, err := meter.NewWorker(ctx, js, store, cfg); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer := uuid.NewString()
	event := func(status usage.Status) usage.Event {
		return usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
			KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
			Status: status, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: 10, CompletionTokens: 1}}
	}
	first := event(usage.StatusOK)
	if err := pub.Publish(ctx, &first); err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second)) // taken, not acknowledged for the test's life
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	estimate := event(usage.StatusCrashed)
	estimate.UsageSource = usage.SourceEstimated
	if err := pub.Publish(ctx, &estimate); err != nil {
		t.Fatal(err)
	}
	metertest.StartWorker(t, ctx, js, store, cfg)
	if row := waitUsage(t, store, customer, 1); row.PromptTokens != 10 {
		t.Fatalf("usage = %+v, want the estimate's 10 prompt tokens", row)
	}
}

// waitConsumer polls the consumer's info until ok holds, failing the test
// (naming what) after 20 seconds.
func waitConsumer(t *testing.T, cons jetstream.Consumer, what string, ok func(*jetstream.ConsumerInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ci, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok(ci) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: consumer still at %+v", what, ci)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkerReleasesAnEstimateWhenTheEventsBeforeItAreGone: a worker
// holds an estimate until the first event not acknowledged is younger
// than the duplicate window, and read that event at the consumer's ack
// floor + 1. When that sequence is gone from the stream (deleted, or lost
// with a NATS store restarted after a kill: a crash review saw a floor of
// 510 under a stream starting at 4,175), the read failed and the estimates
// were held, kept from redelivery, for good: in neither the ledger nor the
// dead-letter stream. The first event not acknowledged is the first one
// the stream still holds past the floor.
func TestWorkerReleasesAnEstimateWhenTheEventsBeforeItAreGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, js, stream, cfg, pub := estimateRig(t, ctx)
	customer := uuid.NewString()
	gone := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
		KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
		Usage: usage.Tokens{PromptTokens: 1000, CompletionTokens: 1}}
	for range 3 {
		gone.ID = uuid.NewString()
		if err := pub.Publish(ctx, &gone); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if err := stream.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // past the window: the estimate is held unless released
	estimate := gone
	estimate.ID, estimate.Status, estimate.UsageSource = uuid.NewString(), usage.StatusCrashed, usage.SourceEstimated
	estimate.Usage = usage.Tokens{PromptTokens: 10, CompletionTokens: 1}
	if err := pub.Publish(ctx, &estimate); err != nil {
		t.Fatal(err)
	}
	metertest.StartWorker(t, ctx, js, store, cfg)
	if row := waitUsage(t, store, customer, 1); row.PromptTokens != 10 {
		t.Fatalf("usage = %+v, want the estimate's 10 prompt tokens", row)
	}
}

// fetchOne takes the next message from cons, as a worker that keeps it
// unacknowledged would.
func fetchOne(t *testing.T, cons jetstream.Consumer) jetstream.Msg {
	t.Helper()
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msg jetstream.Msg
	for m := range b.Messages() {
		msg = m
	}
	if msg == nil {
		t.Fatalf("no message delivered: %v", b.Error())
	}
	return msg
}

// estimateRig is a ledger, and a usage stream with a duplicate window of
// 1 s on a server of its own, with the workers' consumer made (a worker of
// cfg, not run) and a publisher to it.
func estimateRig(t *testing.T, ctx context.Context) (*ledger.Store, jetstream.JetStream, jetstream.Stream, meter.WorkerConfig, *meter.Publisher) {
	t.Helper()
	store := ledgertest.NewStore(t)
	js := metertest.Connect(t, metertest.NewServer(t))
	sc := meter.StreamConfig{DuplicateWindow: time.Second}
	stream, err := meter.EnsureStream(ctx, js, sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := meter.WorkerConfig{AckWait: time.Minute, Stream: sc}
	if _, err := meter.NewWorker(ctx, js, store, cfg); err != nil {
		t.Fatal(err)
	}
	return store, js, stream, cfg, meter.NewPublisher(js, sc, 0)
}
