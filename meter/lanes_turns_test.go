package meter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// turnStore is the real ledger whose WriteEvents calls (each one lane's
// transaction) wait, once begun, until the test releases them: each call
// sends its release on calls as it begins. overlap records a call begun
// while another had not ended.
type turnStore struct {
	*ledger.Store
	calls   chan chan struct{}
	mu      sync.Mutex
	running int
	overlap bool
}

func (s *turnStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	s.mu.Lock()
	s.overlap = s.overlap || s.running > 0
	s.running++
	s.mu.Unlock()
	release := make(chan struct{})
	s.calls <- release
	<-release
	n, err := s.Store.WriteEvents(ctx, events)
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return n, err
}

// next returns the release of the next call to begin.
func (s *turnStore) next(t *testing.T) chan struct{} {
	t.Helper()
	select {
	case r := <-s.calls:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no write call began within 30 s")
		return nil
	}
}

// TestWorkerLanesTakeTurnsBetweenWholeAndSplitBatches: a batch written
// whole (smaller than a backlog's) touches every lane's customers, so it
// waits until the split batch before it is written, and the split batch
// after it waits for it: one customer's events are never in two
// transactions at once, nor committed out of order. Each batch's write is
// held until the next batch has been decoded (its events are dated in a
// past month: the Observer counts them as LateEvent) and a while more,
// time enough for a worker that did not wait to begin the next write.
// One customer's split batch is one part, in one of 16 lanes; a whole
// batch goes to the first lane, which the split part misses 15 times in 16.
func TestWorkerLanesTakeTurnsBetweenWholeAndSplitBatches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	store := &turnStore{Store: ledgertest.NewStore(t), calls: make(chan chan struct{}, 64)}
	obs := &lateObserver{}
	customer := uuid.NewString()
	past := time.Now().AddDate(0, -2, 0)
	ids := publishBurst(t, js, customer, time.Now(), 1200) // split: one part
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 1200, WriteLanes: 16, BatchWait: time.Second, Observer: obs})
	held := store.next(t)
	// hold releases held once the worker has decoded `late` past-month
	// events and has had a while to begin another write, and returns
	// the release of the next write.
	hold := func(held chan struct{}, late int64) chan struct{} {
		for deadline := time.Now().Add(30 * time.Second); obs.late.Load() < late; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d late events decoded, want %d", obs.late.Load(), late)
			}
		}
		var next chan struct{}
		select {
		case next = <-store.calls: // begun while held was not written
		case <-time.After(2 * time.Second):
		}
		close(held)
		if next == nil {
			next = store.next(t)
		}
		return next
	}
	ids = append(ids, publishBurst(t, js, customer, past, 200)...) // whole
	held = hold(held, 200)
	ids = append(ids, publishBurst(t, js, customer, past, 1200)...) // split again
	held = hold(held, 1400)
	close(held)
	go func() { // any write after these: the batcher may have cut one short
		for {
			select {
			case r := <-store.calls:
				close(r)
			case <-ctx.Done():
				return
			}
		}
	}()
	waitAllAcked(t, js, "every event written")
	if stored, err := store.StoredIDs(ctx, ids); err != nil || len(stored) != len(ids) {
		t.Fatalf("%d of %d events in the ledger (%v)", len(stored), len(ids), err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.overlap {
		t.Error("a write began while the write of another batch had not ended: a whole batch did not wait for the lanes, or a split batch for a whole one")
	}
}

// publishBurst stores n events of customer at time at in the usage
// stream at once (asynchronously, so that a worker reads them as one
// batch), and returns their ids.
func publishBurst(t *testing.T, js jetstream.JetStream, customer string, at time.Time, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		e := groupEvent(customer, int64(i+1))
		e.Time = at
		data, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(meter.DefaultSubject)
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, e.ID)
		if _, err := js.PublishMsgAsync(msg); err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing took over 30 s")
	}
	return ids
}
