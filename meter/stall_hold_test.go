package meter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// downStore is a Store whose every write fails as a database out of
// reach does, until up is closed; then it writes to the ledger.
type downStore struct {
	meter.Store
	up chan struct{}
}

func (s downStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	select {
	case <-s.up:
		return s.Store.WriteEvents(ctx, events)
	default:
		return 0, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused (the test's outage)")
	}
}

// TestAStalledWorkerLeavesTheBacklogToTheOthers (a review): a worker whose
// writes failed read on, while its batch waited for the writer, everything
// the consumer would deliver to it, up to the consumer's max_ack_pending,
// keeping it alive: the worker beside it that could write was left with
// 73 of 600 events (0 here). A stalled worker holds six batches at most
// now, and the other writes the rest, long before any ack wait runs out.
func TestAStalledWorkerLeavesTheBacklogToTheOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, dbURL := ledgertest.NewStoreURL(t)
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	countEvents := func() (n int, err error) {
		err = db.QueryRow(ctx, `SELECT count(*) FROM usage_events`).Scan(&n)
		return n, err
	}
	js := metertest.NewStream(t)
	const size = 20
	cfg := meter.WorkerConfig{BatchSize: size, BatchWait: 5 * time.Millisecond, AckWait: 60 * time.Second}
	down := downStore{Store: store, up: make(chan struct{})}
	metertest.StartWorker(t, ctx, js, down, cfg)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	publishEvents(t, ctx, pub, 600) // the stalled worker, alone, takes what it will
	time.Sleep(time.Second)
	metertest.StartWorker(t, ctx, js, store, cfg)

	// What the stalled worker may hold, a batch each: the one a lane
	// retries, the one Run waits to hand out, flush's and the one it reads
	// ahead, the handler's channel, nats.go's buffer; and the message the
	// handler is sending.
	const mostHeld = 6*size + 1
	var written int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if written, err = countEvents(); err != nil {
			t.Fatal(err)
		}
		if written >= 600-mostHeld {
			break
		}
	}
	if written < 600-mostHeld {
		t.Fatalf("the writing worker wrote %d of 600 events in 15 s; the stalled one holds the rest (it may hold %d)", written, mostHeld)
	}
	close(down.up)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && written < 600; time.Sleep(50 * time.Millisecond) {
		if written, err = countEvents(); err != nil {
			t.Fatal(err)
		}
	}
	if written != 600 {
		t.Fatalf("ledger holds %d of 600 events once the stalled worker writes again", written)
	}
}

// TestAWorkerStoppingInAnOutageSetsNothingAside (a review): a worker
// stopped while its writes failed handed its events back (Nak), the
// server delivered them again at once to its subscription, still
// draining, and the batcher, waiting on the writer, took them on into its
// next batch: round and round, past max_deliver, until 90 events of 90
// were in the dead-letter stream though none was refused. A stopping
// worker reads nothing more into the batcher, and stops within its drain
// wait; the events are the next worker's, each written once.
func TestAWorkerStoppingInAnOutageSetsNothingAside(t *testing.T) {
	ctx := context.Background()
	store, dbURL := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{BatchSize: 20, BatchWait: 5 * time.Millisecond, AckWait: 3 * time.Second, MaxDeliver: 2}
	wctx, stop := context.WithCancel(ctx)
	down := downStore{Store: store, up: make(chan struct{})}
	stopped := metertest.StartWorker(t, wctx, js, down, cfg)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	publishEvents(t, ctx, pub, 90)
	time.Sleep(time.Second) // the worker holds them, failing to write
	stop()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30 s")
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 100); err != nil || len(letters) != 0 {
		t.Fatalf("%d dead letters (%v) from a worker stopped in an outage; want none: no event was refused", len(letters), err)
	}

	wctx, stop = context.WithCancel(ctx)
	defer stop()
	metertest.StartWorker(t, wctx, js, store, cfg)
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var events int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && events < 90; time.Sleep(50 * time.Millisecond) {
		if err := db.QueryRow(ctx, `SELECT count(*) FROM usage_events`).Scan(&events); err != nil {
			t.Fatal(err)
		}
	}
	if events != 90 {
		t.Fatalf("ledger holds %d of 90 events once a worker writes again", events)
	}
}

// hangingStore is a Store whose Postgres hangs: a write answers only when
// its context ends.
type hangingStore struct{ meter.Store }

func (hangingStore) WriteEvents(ctx context.Context, _ []usage.Event) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestAWorkerStoppingWhileTheLedgerHangsSetsNothingAside (a review): the
// hand-back's delay ran from the Nak, while the subscription drained only
// once the batcher, waiting for the writer, got back to its loop; with
// Postgres hanging, each batch's last attempt took a third of the ack
// wait, longer than the delay, and the events handed back first came
// back to the stopping worker, round and round past max_deliver (8 dead
// letters), the stop taking 118 s. The drain begins as the worker's
// context ends now, and once one attempt has failed after it, what is
// left is handed back without one.
func TestAWorkerStoppingWhileTheLedgerHangsSetsNothingAside(t *testing.T) {
	ctx := context.Background()
	store, dbURL := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{BatchSize: 20, BatchWait: 5 * time.Millisecond, AckWait: 33 * time.Second, MaxDeliver: 2, WriteLanes: 1}
	wctx, stop := context.WithCancel(ctx)
	stopped := metertest.StartWorker(t, wctx, js, hangingStore{store}, cfg)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	publishEvents(t, ctx, pub, 200)
	time.Sleep(2 * time.Second)
	stop()
	begun := time.Now()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not stop within 60 s")
	}
	// The attempt in progress at the stop runs its course (a third of the
	// ack wait, 11 s); nothing after it waits.
	if took := time.Since(begun); took > cfg.AckWait/3+2*5*time.Second {
		t.Errorf("the worker took %s to stop; want its last attempt's %s, and its drain", took, cfg.AckWait/3)
	}

	wctx, stop = context.WithCancel(ctx)
	defer stop()
	metertest.StartWorker(t, wctx, js, store, cfg)
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var events int
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline) && events < 200; time.Sleep(50 * time.Millisecond) {
		if err := db.QueryRow(ctx, `SELECT count(*) FROM usage_events`).Scan(&events); err != nil {
			t.Fatal(err)
		}
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 300); err != nil || len(letters) != 0 {
		t.Errorf("%d dead letters (%v) from a worker stopped while the ledger hung; want none: no event was refused", len(letters), err)
	}
	if events != 200 {
		t.Fatalf("ledger holds %d of 200 events once a worker writes again", events)
	}
}
