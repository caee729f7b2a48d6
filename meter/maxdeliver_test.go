package meter_test

import (
	"context"
	"encoding/json"
	"strings"
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

// handBackOnce fetches n events from the worker's consumer and hands them
// back (Nak), so that their next delivery is their second.
func handBackOnce(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) jetstream.Consumer {
	t.Helper()
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	handed := 0
	for m := range b.Messages() {
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
		handed++
	}
	if handed != n {
		t.Fatalf("fetched %d events, want %d", handed, n)
	}
	return cons
}

// deadLettersOnceDrained waits (up to 10 s) for the consumer to have no
// event pending or unacknowledged and the dead-letter stream some letter,
// and returns the letters.
func deadLettersOnceDrained(t *testing.T, ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer) []usage.DeadLetter {
	t.Helper()
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var letters []usage.DeadLetter
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := cons.Info(ctx)
		if letters, _ = dlq.List(ctx, 0, 10); err == nil && info.NumAckPending == 0 && info.NumPending == 0 && len(letters) > 0 {
			break
		}
	}
	return letters
}

// The ledger store tells a worker which events it holds.
var _ meter.StoredChecker = (*ledger.Store)(nil)

// TestMaxDeliverChecksTheLedger: an event delivered more than MaxDeliver
// times was set aside "without being written" whether or not the ledger
// held it: a worker that crashed (or lost its acks) after its commit,
// again and again, left billed events in the dead-letter stream, for an
// operator to chase. The worker now asks the ledger first: an event it
// holds is acknowledged; one it does not is set aside as before (and so
// are all when the ledger cannot answer: TestMaxDeliverCheckDoesNotStallTheBatch).
func TestMaxDeliverChecksTheLedger(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	customer, key := uuid.NewString(), uuid.NewString()
	event := func(prompt int64) usage.Event {
		return usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
			Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: prompt}}
	}
	billed, lost := event(7), event(11)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	for _, e := range []usage.Event{billed, lost} {
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	// The first is in the ledger already, as after a commit whose acks were lost.
	if n, err := store.WriteEvents(ctx, []usage.Event{billed}); err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v", n, err)
	}
	cfg := meter.WorkerConfig{MaxDeliver: 1}
	if _, err := meter.NewWorker(ctx, js, store, cfg); err != nil {
		t.Fatal(err)
	}
	cons := handBackOnce(t, ctx, js, 2) // the worker's delivery is their second, past MaxDeliver 1
	metertest.StartWorker(t, ctx, js, store, cfg)
	letters := deadLettersOnceDrained(t, ctx, js, cons)
	if len(letters) != 1 || letters[0].EventID != lost.ID || !strings.Contains(letters[0].Reason, "delivered 2 times") {
		t.Fatalf("dead letters %+v; want the one event the ledger does not hold (%s), not the billed one (%s)", letters, lost.ID, billed.ID)
	}
	page, err := store.Usage(ctx, ledger.UsageQuery{CustomerID: customer})
	if err != nil || len(page.Data) != 1 || page.Data[0].Requests != 1 || page.Data[0].PromptTokens != 7 {
		t.Fatalf("usage = %+v, %v; want the billed event once", page.Data, err)
	}
	stored, err := store.StoredIDs(ctx, []string{billed.ID, strings.ToUpper(billed.ID), lost.ID, "not-a-uuid", ""})
	if err != nil || !stored[billed.ID] || !stored[strings.ToUpper(billed.ID)] || stored[lost.ID] || len(stored) != 2 {
		t.Fatalf("StoredIDs = %v, %v; want the billed event's id, in either case, alone", stored, err)
	}
}

// TestMaxDeliverDoesNotAckAnInvalidIDThatParsesToAStoredOne: storedAlready
// asked the ledger about the event's id as decoded, before Validate, and
// StoredIDs parses it with uuid.Parse, which takes "{uuid}", "urn:uuid:…"
// and 32 bare hex digits as the same UUID. An event whose id is one of
// those spellings of a stored event's id is not in the ledger (Validate
// refuses its id: no worker could ever write it), and may be another
// customer's, other tokens; past max_deliver it was acknowledged as
// "in the ledger already", dropped without a dead letter.
func TestMaxDeliverDoesNotAckAnInvalidIDThatParsesToAStoredOne(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	billed := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(), KeyID: uuid.NewString(),
		Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 7}}
	if n, err := store.WriteEvents(ctx, []usage.Event{billed}); err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v", n, err)
	}
	cfg := meter.WorkerConfig{MaxDeliver: 1}
	if _, err := meter.NewWorker(ctx, js, store, cfg); err != nil {
		t.Fatal(err)
	}
	// Another customer's event, its id the billed one's in braces.
	other := billed
	other.ID = "{" + billed.ID + "}"
	other.CustomerID, other.KeyID = uuid.NewString(), uuid.NewString()
	other.Usage.PromptTokens = 999
	data, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	if err := pub.PublishData(ctx, other.ID, data); err != nil {
		t.Fatal(err)
	}
	cons := handBackOnce(t, ctx, js, 1)
	metertest.StartWorker(t, ctx, js, store, cfg)
	letters := deadLettersOnceDrained(t, ctx, js, cons)
	if len(letters) != 1 || letters[0].EventID != other.ID {
		t.Fatalf("dead letters %+v; want the event with id %q (not in the ledger: its id is no valid event id), set aside, not acknowledged as the stored %s",
			letters, other.ID, billed.ID)
	}
}

// hungStore is a Store whose Postgres hangs for the check (a network
// partition, a stopped server): StoredIDs answers only when its context ends.
type hungStore struct{}

func (hungStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	return len(events), nil
}

func (hungStore) StoredIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

var _ meter.StoredChecker = hungStore{}

// TestMaxDeliverCheckDoesNotStallTheBatch: decode asked the ledger about
// each event past max_deliver one at a time, each with 5 s to answer, in
// the worker's one decode loop, before the batch reaches handOver (which
// alone keeps its ack wait from running out). With Postgres hanging, a
// batch holding k such events stalled the worker for 5k s (a batch is up
// to 6,000 events: over 8 hours), nothing pulled or written meanwhile, and
// the batch's ack wait ran out, every event in it, good ones too, being
// redelivered (on towards max_deliver). Four such events, with a 6 s ack
// wait, must be set aside within it: one question, 5 s at most, for all.
func TestMaxDeliverCheckDoesNotStallTheBatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{MaxDeliver: 1, AckWait: 6 * time.Second}
	if _, err := meter.NewWorker(ctx, js, hungStore{}, cfg); err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	ids := map[string]bool{}
	for range 4 {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(), KeyID: uuid.NewString(),
			Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
		ids[e.ID] = true
	}
	cons := handBackOnce(t, ctx, js, 4)
	start := time.Now()
	metertest.StartWorker(t, ctx, js, hungStore{}, cfg)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for deadline := start.Add(cfg.AckWait); time.Now().Before(deadline) && len(got) < len(ids); time.Sleep(50 * time.Millisecond) {
		letters, _ := dlq.List(ctx, 0, 100)
		for _, l := range letters {
			got[l.EventID] = true
		}
	}
	info, _ := cons.Info(ctx)
	if len(got) < len(ids) {
		t.Fatalf("after %v (the ack wait), %d of %d events past max_deliver set aside (consumer: %d redelivered, %d ack pending); want all: the ledger check of a hung Postgres stalls the worker 5 s per event",
			time.Since(start).Round(time.Second), len(got), len(ids), info.NumRedelivered, info.NumAckPending)
	}
}

// TestOverDeliveredCopyOfAnEventInFlightIsNotSetAside: events queued in a
// worker behind a Postgres outage (in nats.go's buffer, waiting for a
// batch) ran out their ack wait and came again while their first delivery
// was on its way to the ledger. Once Postgres was back, the copy past
// max_deliver asked the ledger before the first had been written, and was
// set aside "delivered 21 times without being written": a crash review
// found 196 such dead letters of events the ledger held, after a 75 s
// outage. The worker now asks the ledger once what is in flight, its own
// batch included, is written. Here the first delivery waits out its ack
// wait in a batch still filling, so that the copy joins the same batch.
func TestOverDeliveredCopyOfAnEventInFlightIsNotSetAside(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	customer, key := uuid.NewString(), uuid.NewString()
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	var ids []string
	for range 6 {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
			Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 3}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	cfg := meter.WorkerConfig{MaxDeliver: 1, AckWait: time.Second, BatchSize: 100, WriteLanes: 1, BatchWait: 1500 * time.Millisecond}
	metertest.StartWorker(t, ctx, js, store, cfg)
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		info, err := cons.Info(ctx)
		if err == nil && info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not drain the stream in 30 s: %+v, %v", info, err)
		}
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	letters, _ := dlq.List(ctx, 0, 100)
	stored, err := store.StoredIDs(ctx, ids)
	if err != nil || len(stored) != len(ids) || len(letters) != 0 {
		t.Fatalf("%d of %d events in the ledger (%v), %d dead letters %+v; want every event in the ledger and no dead letter",
			len(stored), len(ids), err, len(letters), letters)
	}
}

// TestAnEventsLastAllowedDeliveryIsWritten: MaxDeliver is how many
// deliveries an event may have: delivered for the MaxDeliver-th time, it
// is written as any other, not set aside.
func TestAnEventsLastAllowedDeliveryIsWritten(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	customer := uuid.NewString()
	e := groupEvent(customer, 5)
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	cfg := meter.WorkerConfig{MaxDeliver: 2}
	if _, err := meter.NewWorker(ctx, js, store, cfg); err != nil {
		t.Fatal(err)
	}
	handBackOnce(t, ctx, js, 1) // the worker's delivery is its second, MaxDeliver's
	metertest.StartWorker(t, ctx, js, store, cfg)
	waitUsage(t, store, customer, 1)
	waitAllAcked(t, js, "the event written")
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 0, 10); err != nil || len(letters) != 0 {
		t.Fatalf("dead letters %+v (%v); want none", letters, err)
	}
}
