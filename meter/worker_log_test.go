package meter_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// failingFirst is a Store whose first n writes fail as a database that is
// down does, then writes to the ledger.
type failingFirst struct {
	meter.Store
	n atomic.Int64
}

func (f *failingFirst) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	if f.n.Add(-1) >= 0 {
		return 0, errors.New("failed to connect to `host=127.0.0.1`: connection refused")
	}
	return f.Store.WriteEvents(ctx, events)
}

// syncBuffer is a bytes.Buffer safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestWriteFailuresLoggedOncePerRun: a run of failed writes (Postgres
// down) is one WARN line saying what to check, and its end one INFO line,
// not a line a retry per lane for the whole outage (an observability
// review); the event is written once the ledger takes it.
func TestWriteFailuresLoggedOncePerRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ledgerStore := ledgertest.NewStore(t)
	store := &failingFirst{Store: ledgerStore}
	store.n.Store(4)
	var logs syncBuffer
	js := metertest.NewStream(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	customer := uuid.NewString()
	e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: uuid.NewString(),
		Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
		UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 3, CompletionTokens: 2}}
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, ledgerStore, customer, 1)
	out := logs.String()
	if n := strings.Count(out, "write batch failed"); n != 1 || !strings.Contains(out, "check Postgres") {
		t.Fatalf("4 failed writes logged %d WARN lines (want 1, saying what to check):\n%s", n, out)
	}
	if !strings.Contains(out, "writing to the ledger again") {
		t.Fatalf("the end of the failures is not logged:\n%s", out)
	}
}
