package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestABatchWaitingForItsLaneIsKeptAlive: with one write lane, a batch
// pulled while the lane is still writing the one before (the ledger
// hanging) waits for the lane with its ack wait extended (handOver), as
// the batch being written is (write's retries): through three ack waits
// no event is delivered twice, and each lands once the ledger answers.
func TestABatchWaitingForItsLaneIsKeptAlive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	held := heldStore{Store: store, begun: make(chan struct{}, 1), release: make(chan struct{})}
	obs := &redeliveries{}
	cfg := meter.WorkerConfig{BatchSize: 10, BatchWait: 20 * time.Millisecond, WriteLanes: 1, AckWait: 2 * time.Second, Observer: obs}
	metertest.StartWorker(t, ctx, js, held, cfg)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	ids := publishEvents(t, ctx, pub, cfg.BatchSize) // a full batch: the lane's
	select {
	case <-held.begun:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not begin writing its batch")
	}
	ids = append(ids, publishEvents(t, ctx, pub, cfg.BatchSize)...) // the next: waits for the lane
	time.Sleep(3 * cfg.AckWait)
	close(held.release)
	waitAllAcked(t, js, "every event written")
	if stored, err := store.StoredIDs(ctx, ids); err != nil || len(stored) != len(ids) {
		t.Fatalf("%d of %d events in the ledger (%v)", len(stored), len(ids), err)
	}
	if n := obs.n.Load(); n != 0 {
		t.Errorf("%d redeliveries through a hang of %s (ack wait %s); want none: a batch held was not kept alive", n, 3*cfg.AckWait, cfg.AckWait)
	}
}
