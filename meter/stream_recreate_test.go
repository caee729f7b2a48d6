package meter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// heldAfterCommit is a Store that, once its batch is committed, holds
// it (before the worker can acknowledge it) until release is closed,
// saying on committed how many events it committed.
type heldAfterCommit struct {
	meter.Store
	committed chan int
	release   chan struct{}
}

func (s *heldAfterCommit) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	n, err := s.Store.WriteEvents(ctx, events)
	if err == nil {
		s.committed <- len(events)
		<-s.release
	}
	return n, err
}

// TestAckNeverLandsOnARecreatedStream: a worker holding a batch of the
// usage stream, committed and not yet acknowledged, while the stream is
// deleted and made again, does not acknowledge its batch on the new
// stream. The new stream numbers its events from 1 again, and its
// consumer has the old one's name: JetStream took the old batch's
// acknowledgements (of stream sequences 1-40) for the new events 1-40,
// delivered to another worker and not written, which were then never
// delivered again (and trimmed below the ack floor): lost.
func TestAckNeverLandsOnARecreatedStream(t *testing.T) {
	ctx := context.Background()
	srv := metertest.NewServer(t)
	admin := metertest.Connect(t, srv)
	if _, err := meter.EnsureStream(ctx, admin, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(admin, meter.StreamConfig{}, 0)

	// Worker B, on a connection of its own, pulls the old stream's 40
	// events in one batch, commits them, and is held before its acks.
	ncB, err := nats.Connect(srv.ClientURL(), nats.Name("worker-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer ncB.Close()
	jsB, err := jetstream.New(ncB)
	if err != nil {
		t.Fatal(err)
	}
	publishEvents(t, ctx, pub, 40)
	store := &heldAfterCommit{Store: ledgertest.NewStore(t), committed: make(chan int, 1), release: make(chan struct{})}
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	doneB := metertest.StartWorker(t, bctx, jsB, store, meter.WorkerConfig{BatchSize: 40, BatchWait: 10 * time.Second})
	if n := <-store.committed; n != 40 {
		t.Fatalf("worker B committed a batch of %d events, want 40", n)
	}
	subsB := func() uint32 {
		t.Helper()
		cz, err := srv.Connz(&server.ConnzOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cz.Conns {
			if c.Name == "worker-b" {
				return c.NumSubs
			}
		}
		t.Fatal("worker B's connection is not on the server")
		return 0
	}
	consuming := subsB()

	// The stream is deleted (B's subscription is told, and ends) and made
	// again; 41 new events are published, and worker A is delivered them
	// all, to die before writing them.
	if err := admin.DeleteStream(ctx, meter.DefaultStreamName); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker B's subscription of the deleted consumer ended", func() bool { return subsB() < consuming })
	if _, err := meter.EnsureStream(ctx, admin, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	jsA := metertest.Connect(t, srv)
	if _, err := meter.NewWorker(ctx, jsA, ledgertest.NewStore(t), meter.WorkerConfig{}); err != nil { // the consumer, as A sets it up
		t.Fatal(err)
	}
	fresh := publishEvents(t, ctx, pub, 41)
	consA, err := jsA.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	var heldByA []jetstream.Msg
	for len(heldByA) < len(fresh) {
		batch, err := consA.Fetch(len(fresh)-len(heldByA), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			heldByA = append(heldByA, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
	}

	// B goes on: its Run ends (its consumer is gone) once its batch is
	// acknowledged or not, and whatever it sent reaches the server.
	close(store.release)
	stopB()
	<-doneB
	if err := ncB.Flush(); err != nil {
		t.Fatal(err)
	}
	// A acknowledges the last event it holds, and waits for JetStream's
	// answer: JetStream has then taken every acknowledgement B sent
	// before (one queue per consumer, in order).
	if err := heldByA[len(heldByA)-1].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := consA.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 40 || info.AckFloor.Stream != 0 {
		t.Fatalf("the new stream's consumer has %d events unacknowledged, ack floor %d, after worker A, holding 41, acknowledged its last; "+
			"want 40 and 0: worker B's acknowledgements of the deleted stream's events acknowledged the new stream's, which A never wrote",
			info.NumAckPending, info.AckFloor.Stream)
	}
}
