package meter_test

import (
	"context"
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

// TestAWorkerPickedAsADeadlocksVictimRetries: Postgres breaks a deadlock
// by failing one of its transactions (40P01), a failure of the moment
// that the same batch, tried again, gets past: the meter must retry it
// (DESIGN.md, invariant 2c: only transient failures are retried, data
// errors isolated), never set its events aside in the dead-letter stream
// as if the ledger had refused their data. Here a transaction of the
// test's holds the customer's balance row, the worker's batch of one event
// waits for it, and the test's transaction then waits for the event's id
// the batch claimed: Postgres fails the worker's transaction (its
// deadlock_timeout runs out first). The event must land, once, and
// nothing be set aside.
func TestAWorkerPickedAsADeadlocksVictimRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, url := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	c, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := store.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: c.Currency, Input: "1", Output: "2",
		EffectiveFrom: now.AddDate(0, -1, 0)}); err != nil {
		t.Fatal(err)
	}
	event := func() usage.Event {
		return usage.Event{Version: 1, ID: uuid.NewString(), Time: now, CustomerID: c.ID, KeyID: k.ID,
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 10, CompletionTokens: 5}}
	}
	// The customer's balance row, for the test's transaction to hold.
	if _, err := store.WriteEvents(ctx, []usage.Event{event()}); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var mine int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&mine); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// Far above the worker's (the server's default, 1 s): Postgres checks
	// for the deadlock in the worker's session first, and fails its
	// transaction.
	if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '20s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE customer_balances SET charges_e12 = charges_e12 WHERE customer_id = $1`, c.ID); err != nil {
		t.Fatal(err)
	}

	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 10})
	e := event()
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	// A connection to watch Postgres with. The worker's batch has
	// claimed e's id and waits for the balance row.
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> $1 AND wait_event_type = 'Lock'`, mine).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker's batch never waited for the balance row the test holds")
		}
	}
	// The test's transaction now waits for the worker's claim of e's id:
	// a deadlock, which Postgres breaks by failing the worker's batch.
	if _, err := tx.Exec(ctx, `INSERT INTO event_ids (id, occurred_at) VALUES ($1, $2)`, e.ID, e.Time); err != nil {
		t.Fatalf("the test's transaction was the deadlock's victim, not the worker's: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The victim's session reports the deadlock to the statistics when
	// it next flushes them (within seconds).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var deadlocks int64
		if err := watch.QueryRow(ctx, `SELECT pg_stat_clear_snapshot(), deadlocks FROM pg_stat_database
			WHERE datname = current_database()`).Scan(nil, &deadlocks); err != nil {
			t.Fatal(err)
		}
		if deadlocks > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Postgres saw no deadlock: the test did not do what it means to")
		}
	}

	waitUsage(t, store, c.ID, 2)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	letters, err := dlq.List(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 0 {
		t.Fatalf("dead letters = %+v, want none: a deadlock is a failure of the moment, retried", letters)
	}
	var stored int
	if err := watch.QueryRow(ctx, `SELECT count(*) FROM usage_events WHERE id = $1`, e.ID).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("the event is stored %d times (%v), want once", stored, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
