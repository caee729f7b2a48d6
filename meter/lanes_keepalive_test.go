package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// laneRig is a worker of one write lane (cfg, WriteLanes 1) whose lane
// writes a full batch, held (heldStore), while the next batch, pulled
// meanwhile, waits for the lane (handOver), and the one after it for Run
// (the batcher's flush): ids are the three batches' events, done receives
// what Run returned.
type laneRig struct {
	js    jetstream.JetStream
	store *ledger.Store
	held  heldStore
	ids   []string
	done  <-chan error
}

func newLaneRig(t *testing.T, ctx context.Context, cfg meter.WorkerConfig) *laneRig {
	t.Helper()
	r := &laneRig{js: metertest.NewStream(t), store: ledgertest.NewStore(t)}
	r.held = heldStore{Store: r.store, begun: make(chan struct{}, 1), release: make(chan struct{})}
	cfg.WriteLanes = 1
	r.done = metertest.StartWorker(t, ctx, r.js, r.held, cfg)
	pub := meter.NewPublisher(r.js, meter.StreamConfig{}, 0)
	r.ids = publishEvents(t, ctx, pub, cfg.BatchSize) // a full batch: the lane's
	select {
	case <-r.held.begun:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not begin writing its batch")
	}
	r.ids = append(r.ids, publishEvents(t, ctx, pub, cfg.BatchSize)...) // the next: waits for the lane
	r.ids = append(r.ids, publishEvents(t, ctx, pub, cfg.BatchSize)...) // and the next: waits for Run
	cons, err := r.js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	waitConsumer(t, cons, "the three batches delivered", func(ci *jetstream.ConsumerInfo) bool {
		return ci.NumAckPending == len(r.ids)
	})
	return r
}

// stored fails t unless every event of the rig is in the ledger.
func (r *laneRig) stored(t *testing.T, ctx context.Context) {
	t.Helper()
	if stored, err := r.store.StoredIDs(ctx, r.ids); err != nil || len(stored) != len(r.ids) {
		t.Fatalf("%d of %d events in the ledger (%v)", len(stored), len(r.ids), err)
	}
}

// TestABatchWaitingForItsLaneIsKeptAlive: with one write lane, a batch
// pulled while the lane is still writing the one before (the ledger
// hanging) waits for the lane with its ack wait extended (handOver), as
// the batch being written is (write's retries) and the one behind them
// waiting for Run (the batcher's flush): through three ack waits
// no event is delivered twice, and each lands once the ledger answers.
func TestABatchWaitingForItsLaneIsKeptAlive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := &redeliveries{}
	cfg := meter.WorkerConfig{BatchSize: 10, BatchWait: 20 * time.Millisecond, AckWait: 2 * time.Second, Observer: obs}
	r := newLaneRig(t, ctx, cfg)
	time.Sleep(3 * cfg.AckWait)
	close(r.held.release)
	waitAllAcked(t, r.js, "every event written")
	r.stored(t, ctx)
	if n := obs.n.Load(); n != 0 {
		t.Errorf("%d redeliveries through a hang of %s (ack wait %s); want none: a batch held was not kept alive", n, 3*cfg.AckWait, cfg.AckWait)
	}
}

// TestAStoppingWorkerWritesTheBatchesItHolds: a worker stopped while its
// lane writes one batch and the next two wait writes all three before Run
// returns (the ledger answers): a batch waiting is written
// once more, not handed back untried. No other worker runs: what is not
// in the ledger then was handed back.
func TestAStoppingWorkerWritesTheBatchesItHolds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	r := newLaneRig(t, wctx, meter.WorkerConfig{BatchSize: 10, BatchWait: 20 * time.Millisecond})
	stop()
	close(r.held.release)
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	r.stored(t, ctx)
	waitAllAcked(t, r.js, "every event written and acknowledged")
}
