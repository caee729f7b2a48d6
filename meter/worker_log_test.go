package meter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestWorkerSetAsideLogNamesItsCustomer: the worker's line for an event it
// sets aside in the dead-letter stream names the event's customer when its
// data says one, as the gateway's own set-aside line does, so that an
// operator knows whose usage waits there; data that names none (not JSON)
// is logged without one.
func TestWorkerSetAsideLogNamesItsCustomer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	customer := uuid.NewString()
	bad := fmt.Appendf(nil, `{"v":1,"id":%q,"time":%q,"customer_id":%q,"key_id":%q,"provider":"p","model":"m",`+
		`"endpoint":"/v1/chat/completions","status":"not a status","usage":{"prompt_tokens":1},"usage_source":"upstream"}`,
		uuid.NewString(), time.Now().UTC().Format(time.RFC3339Nano), customer, uuid.NewString())
	for _, data := range [][]byte{bad, []byte("not json at all")} {
		if _, err := js.Publish(ctx, "tollgate.usage.v1", data); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	var lines []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		lines = lines[:0]
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "set aside in the dead-letter stream") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 2 {
			break
		}
	}
	if len(lines) != 2 {
		t.Fatalf("set-aside lines %q, want 2", lines)
	}
	named := 0
	for _, l := range lines {
		if strings.Contains(l, `"customer_id":"`+customer+`"`) {
			named++
		}
	}
	if named != 1 {
		t.Fatalf("the line of the event with a customer does not name it (or both do):\n%s", strings.Join(lines, "\n"))
	}
}
