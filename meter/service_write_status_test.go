package meter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestServiceStatusTellsFailingWrites: a worker whose writes the ledger
// does not take (its table gone after a rollback: SQLSTATE 42P01, retried
// as transient) kept a clean Status, so its /readyz said ready while
// nothing was written (an operations review: 18 s, one WARN line, then
// DEBUG). Status now carries the write error and since when, until a
// write succeeds again.
func TestServiceStatusTellsFailingWrites(t *testing.T) {
	js := metertest.Connect(t, metertest.NewServer(t))
	store, dbURL := ledgertest.NewStoreURL(t)
	svc := meter.NewService(js, store, meter.WorkerConfig{AckWait: 6 * time.Second, BatchWait: 20 * time.Millisecond})
	svc.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = svc.Stop(ctx)
	}()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	customer := uuid.NewString()
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	publish := func() {
		t.Helper()
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
			KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: 10, CompletionTokens: 1}}
		var err error
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err = pub.Publish(pctx, &e)
			cancel()
			if err == nil {
				return
			}
		}
		t.Fatalf("publish: %v", err)
	}
	publish()
	waitUsage(t, store, customer, 1)
	if st := svc.Status(); st.WriteErr != nil {
		t.Fatalf("status after a write that succeeded: %+v", st)
	}

	if _, err := db.Exec(ctx, `ALTER TABLE usage_events RENAME TO usage_events_away`); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	publish()
	var st meter.ServiceStatus
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st = svc.Status(); st.WriteErr != nil {
			break
		}
	}
	if st.WriteErr == nil || !strings.Contains(st.WriteErr.Error(), "usage_events") || st.WriteSince.Before(before) {
		t.Fatalf("status while the ledger's table is gone: %+v; want the write error, since after %s", st, before.Format(time.RFC3339Nano))
	}
	if st.Err != nil {
		t.Errorf("status while writes fail: Err %v; want the worker still running (Err nil)", st.Err)
	}

	if _, err := db.Exec(ctx, `ALTER TABLE usage_events_away RENAME TO usage_events`); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, store, customer, 2)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st = svc.Status(); st.WriteErr == nil {
			return
		}
	}
	t.Fatalf("status once the ledger takes writes again: %+v; want no write error", st)
}

// TestServiceWriteSinceHoldsThroughRetries: WriteSince is when the
// worker's writes began to fail, not its last failed attempt: while the
// ledger refuses a batch, retried again and again, the status (and
// /readyz's "since") keeps the time the failures began; once the write
// succeeds, it clears.
func TestServiceWriteSinceHoldsThroughRetries(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	store := &holdingStore{Store: ledgertest.NewStore(t), release: make(chan struct{}), written: map[string]bool{}}
	e := groupEvent(uuid.NewString(), 1)
	store.held = e.ID
	svc := meter.NewService(js, store, meter.WorkerConfig{BatchWait: 20 * time.Millisecond})
	svc.Start()
	defer stopService(t, svc)
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	var first meter.ServiceStatus
	var tries int
	eventually(t, "a failed write in the status", func() bool {
		first = svc.Status()
		_, tries = store.state()
		return first.WriteErr != nil
	})
	// Two attempts more, the first of them begun after the status was read.
	eventually(t, "the write tried twice more", func() bool { _, n := store.state(); return n >= tries+2 })
	if st := svc.Status(); st.WriteErr == nil || !st.WriteSince.Equal(first.WriteSince) {
		t.Errorf("status after more failed attempts: %+v; want the write error, since %s still", st, first.WriteSince.Format(time.StampMicro))
	}
	close(store.release)
	eventually(t, "the write error cleared", func() bool { st := svc.Status(); return st.WriteErr == nil && st.WriteSince.IsZero() })
	if w, _ := store.state(); w != 1 {
		t.Errorf("%d events written, want the one held", w)
	}
}
