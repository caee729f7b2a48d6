package meter_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestPublisherGroupsTheEventsOfPublishesInFlight: events published at
// once by many requests go in fewer messages than events (each group one
// JetStream store, delivery and ack), and the worker writes every one of
// them, once, and acknowledges every message.
func TestPublisherGroupsTheEventsOfPublishesInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer := uuid.NewString()
	const n = 60
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			e := groupEvent(customer, int64(i+1))
			<-start
			errs <- pub.Publish(ctx, &e)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs >= n {
		t.Fatalf("stream holds %d messages for %d events published at once: none was grouped", info.State.Msgs, n)
	}
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})
	row := waitUsage(t, store, customer, n)
	if want := int64(n * (n + 1) / 2); row.PromptTokens != want {
		t.Fatalf("prompt tokens = %d, want %d (each event once)", row.PromptTokens, want)
	}
	waitAllAcked(t, js, "every group acknowledged")
}

// TestGroupJetStreamDropsOrRefusesGoesEventByEvent: a group is stored
// under its first event's id; when JetStream drops it as a duplicate of
// that event (published before, alone), the other events are not in the
// stream, and are published one by one. A group larger than the stream
// takes (max_msg_size) is published event by event too.
func TestGroupJetStreamDropsOrRefusesGoesEventByEvent(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	encode := func(e usage.Event) []byte {
		b, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	customer := uuid.NewString()
	first, other := groupEvent(customer, 1), groupEvent(customer, 2)
	if err := pub.PublishData(ctx, first.ID, encode(first)); err != nil {
		t.Fatal(err)
	}
	for i, err := range pub.PublishBatch(ctx, []string{first.ID, other.ID}, [][]byte{encode(first), encode(other)}) {
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	s, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	last, err := s.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || last.Header.Get(nats.MsgIdHdr) != other.ID || last.Header.Get(meter.HeaderEvents) != "" {
		t.Fatalf("stream holds %d messages, the last %q, want 2: the first event alone, then the other alone (the group was a duplicate)",
			info.State.Msgs, last.Header.Get(nats.MsgIdHdr))
	}

	// A stream that takes no message over 1,000 bytes: each event fits,
	// the group of four does not.
	small := meter.StreamConfig{Name: "SMALL", Subject: "small.usage"}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: small.Name, Subjects: []string{small.Subject}, MaxMsgSize: 1000}); err != nil {
		t.Fatal(err)
	}
	spub := meter.NewPublisher(js, small, 0)
	var ids []string
	var datas [][]byte
	for i := range 4 {
		e := groupEvent(customer, int64(i))
		ids, datas = append(ids, e.ID), append(datas, encode(e))
	}
	for i, err := range spub.PublishBatch(ctx, ids, datas) {
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	ss, err := js.Stream(ctx, small.Name)
	if err != nil {
		t.Fatal(err)
	}
	if si, _ := ss.Info(ctx); si.State.Msgs != 4 {
		t.Fatalf("small stream holds %d messages, want the 4 events one by one", si.State.Msgs)
	}
}
