package meter_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// redeliveries counts the messages workers got more than once.
type redeliveries struct{ n atomic.Int64 }

func (r *redeliveries) Redelivered()                         { r.n.Add(1) }
func (r *redeliveries) Published(time.Duration, error)       {}
func (r *redeliveries) BatchWritten(int, int, time.Duration) {}
func (r *redeliveries) DeadLetter(string)                    {}
func (r *redeliveries) ConsumerPending(uint64, uint64)       {}
func (r *redeliveries) TrimFailed()                          {}
func (r *redeliveries) EstimatesHeld(int)                    {}
func (r *redeliveries) LateEvent()                           {}

// TestEventsHeldThroughAStallAreKeptAlive (an outage review): while the
// ledger stalled (a lock held on its rollups), the messages a worker held
// in its channels (a batch in each channel's buffer, and those delivered
// behind a batch waiting for the writer) were not kept alive: each was
// redelivered every ack wait, on towards max_deliver, and with two
// workers on the consumer one could set aside as "delivered 3 times
// without being written" events the other was writing. Every batch a
// worker holds is kept alive now, and the batch it reads ahead while one
// waits for the writer: what is redelivered is only what nats.go and the
// handler's channel hold, a batch each at most (reading those too would
// hoard the consumer's whole backlog: TestAStalledWorkerLeavesTheBacklogToTheOthers).
// No dead letter, each event in the ledger once.
func TestEventsHeldThroughAStallAreKeptAlive(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, dbURL := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	c, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	obs := &redeliveries{}
	cfg := meter.WorkerConfig{BatchSize: 20, BatchWait: 5 * time.Millisecond, AckWait: 3 * time.Second, MaxDeliver: 2, Observer: obs}
	for range 2 {
		metertest.StartWorker(t, ctx, js, store, cfg)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	publish := func(n int) {
		for i := range n {
			e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: c.ID, KeyID: k.ID,
				Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
				Usage: usage.Tokens{PromptTokens: 1, CompletionTokens: 1}}
			if err := pub.Publish(ctx, &e); err != nil {
				t.Fatal(err)
			}
			if i%10 == 9 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	publish(100)

	// The stall: four ack waits, events coming all along.
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE usage_hourly IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	stallEnds := time.Now().Add(4 * cfg.AckWait)
	n := 100
	for time.Now().Before(stallEnds) {
		publish(50)
		n += 50
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var events, ids int
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM usage_events), (SELECT count(*) FROM event_ids)`).Scan(&events, &ids); err != nil {
			t.Fatal(err)
		}
		if events >= n {
			break
		}
	}
	if events != n || ids != n {
		t.Fatalf("ledger holds %d events, %d ids; want %d each", events, ids, n)
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 0, 10); err != nil || len(letters) != 0 {
		t.Errorf("dead letters %+v, %v; want none: every event was written", letters, err)
	}
	// Per worker: the handler's channel and nats.go's buffer (a batch
	// each), and the message the handler is sending.
	if r, most := obs.n.Load(), int64(2*(2*cfg.BatchSize+1)); r > most {
		t.Errorf("%d redeliveries of %d events through a stall of %s (ack wait %s); want at most %d: a batch held was not kept alive", r, n, 4*cfg.AckWait, cfg.AckWait, most)
	}
}
