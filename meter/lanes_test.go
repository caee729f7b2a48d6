package meter_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// laneWatch is the real ledger seen from the worker's side: it records
// what each WriteEvents call (one lane's transaction) held, and holds the
// first call until a second one starts, so that the lanes must be writing
// at once for the test to go on.
type laneWatch struct {
	*ledger.Store
	mu       sync.Mutex
	inFlight map[int]map[string]bool // call number → its customers
	calls    int
	overlap  bool // two calls ran at once
	clash    string
	order    map[string]int64 // customer → the last prompt_tokens written
	outOfOrd string
	second   chan struct{}
}

func (l *laneWatch) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	l.mu.Lock()
	l.calls++
	call := l.calls
	mine := map[string]bool{}
	for i := range events {
		mine[events[i].CustomerID] = true
	}
	for other, theirs := range l.inFlight {
		l.overlap = true
		for c := range mine {
			if theirs[c] && l.clash == "" {
				l.clash = fmt.Sprintf("customer %s in calls %d and %d at once", c, other, call)
			}
		}
	}
	l.inFlight[call] = mine
	if call == 2 {
		close(l.second)
	}
	l.mu.Unlock()
	if call == 1 {
		select {
		case <-l.second:
		case <-time.After(10 * time.Second):
		}
	}
	n, err := l.Store.WriteEvents(ctx, events)
	l.mu.Lock()
	delete(l.inFlight, call)
	if err == nil {
		for i := range events {
			e := &events[i]
			if e.Usage.PromptTokens <= l.order[e.CustomerID] && l.outOfOrd == "" {
				l.outOfOrd = fmt.Sprintf("customer %s: event %d written after %d", e.CustomerID, e.Usage.PromptTokens, l.order[e.CustomerID])
			}
			l.order[e.CustomerID] = e.Usage.PromptTokens
		}
	}
	l.mu.Unlock()
	return n, err
}

// TestWorkerLanesKeepCustomersApart: a worker with three write lanes
// writes a backlog of 40 customers' events in transactions that run at
// once, never two at once for the same customer (so they cannot wait on
// each other's rollup and balance rows), each customer's events in the
// order they were published, and every event exactly once.
func TestWorkerLanesKeepCustomersApart(t *testing.T) {
	const customers, perCustomer = 40, 30
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.Connect(t, metertest.NewServer(t))
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	ids := make([]string, customers)
	for c := range ids {
		ids[c] = uuid.NewString()
	}
	for i := range perCustomer {
		for _, c := range ids {
			e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: c, KeyID: c,
				Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
				UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: int64(i + 1), CompletionTokens: 1}}
			if err := pub.Publish(ctx, &e); err != nil {
				t.Fatal(err)
			}
		}
	}
	watch := &laneWatch{Store: store, inFlight: map[int]map[string]bool{}, order: map[string]int64{},
		second: make(chan struct{})}
	w, err := meter.NewWorker(ctx, js, watch, meter.WorkerConfig{BatchSize: 100, WriteLanes: 3})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for _, c := range ids {
		waitUsage(t, store, c, perCustomer)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	for _, c := range ids { // after the stop: nothing written twice
		waitUsage(t, store, c, perCustomer)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if !watch.overlap {
		t.Error("no two lanes ever wrote at once")
	}
	if watch.clash != "" {
		t.Error(watch.clash)
	}
	if watch.outOfOrd != "" {
		t.Error(watch.outOfOrd)
	}
}
