package meter_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
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

// TestWorkerSurvivesKilledBackends: while events stream in, the worker's
// Postgres backends are killed (pg_terminate_backend) again and again, in
// every state of a batch's transaction (the COPY, the statement, the
// commit). Once the kills stop, every event is in the ledger exactly once,
// its rollups and balances reconcile, and nothing is set aside.
func TestWorkerSurvivesKilledBackends(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, dbURL := ledgertest.NewStoreURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	js := metertest.NewStream(t)
	c, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC()
	if _, err := store.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "3",
		EffectiveFrom: start.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 40, AckWait: 9 * time.Second})

	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	kctx, stopKills := context.WithCancel(ctx)
	var kills atomic.Int64
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for i := 0; kctx.Err() == nil; i++ {
			var n int64
			// Not kctx: a query its end cut off would close admin, which
			// the test reads the ledger with after the kills.
			if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
				FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName).Scan(&n); err == nil {
				kills.Add(n)
			}
			time.Sleep(time.Duration(3+i%17) * time.Millisecond) // kills land in every phase
		}
	}()

	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	const n = 1000
	var pwg sync.WaitGroup
	for p := range 4 {
		pwg.Go(func() {
			for i := p; i < n; i += 4 {
				e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: c.ID, KeyID: k.ID,
					Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
					Usage: usage.Tokens{PromptTokens: int64(i), CompletionTokens: 1}}
				if err := pub.Publish(ctx, &e); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	pwg.Wait()
	// Keep killing until the worker has written at least part of the load
	// under fire.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if kills.Load() >= 10 {
			break
		}
	}
	stopKills()
	<-killed
	t.Logf("%d backends killed", kills.Load())
	if kills.Load() == 0 {
		t.Fatal("no backend was killed: the probe probed nothing")
	}

	var events, ids, prompt int64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM usage_events), (SELECT count(*) FROM event_ids),
			(SELECT coalesce(sum(prompt_tokens), 0) FROM usage_events)`).Scan(&events, &ids, &prompt); err != nil {
			t.Fatal(err)
		}
		if events >= n {
			break
		}
	}
	if events != n || ids != n || prompt != n*(n-1)/2 {
		t.Fatalf("ledger holds %d events, %d ids, %d prompt tokens; want %d, %d, %d", events, ids, prompt, n, n, n*(n-1)/2)
	}
	rec, err := store.Reconcile(ctx, start.Add(-time.Hour).Truncate(time.Hour), time.Now().Add(2*time.Hour).Truncate(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Clean || rec.Events != n {
		t.Fatalf("reconciliation %+v, want clean with %d events", rec, n)
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 0, 10); err != nil || len(letters) != 0 {
		t.Fatalf("dead letters %+v, %v; want none: a killed connection is transient", letters, err)
	}
}
