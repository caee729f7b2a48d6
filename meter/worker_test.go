package meter_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// waitUsage polls the ledger until the customer's usage has want requests.
func waitUsage(t *testing.T, s *ledger.Store, customer string, want int64) ledger.UsageRow {
	t.Helper()
	return waitUsageWithin(t, s, customer, want, 10*time.Second, nil)
}

// waitUsageWithin is waitUsage with its own deadline; on failure it adds
// what explain returns (nil: nothing), to tell where the missing events are.
func waitUsageWithin(t *testing.T, s *ledger.Store, customer string, want int64, within time.Duration, explain func() string) ledger.UsageRow {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		page, err := s.Usage(context.Background(), ledger.UsageQuery{CustomerID: customer})
		if err != nil {
			t.Fatal(err)
		}
		rows := page.Data
		if len(rows) == 1 && rows[0].Requests == want {
			return rows[0]
		}
		if time.Now().After(deadline) {
			why := ""
			if explain != nil {
				why = "; " + explain()
			}
			t.Fatalf("usage = %+v after %s, want %d requests%s", rows, within, want, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkerWritesEachEventOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 7})

	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer, key := uuid.NewString(), uuid.NewString()
	var events []usage.Event
	for i := range 50 {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: int64(i), CompletionTokens: 2}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	// A republish within the duplicate window is dropped by JetStream; one
	// beyond it (simulated by publishing without a Nats-Msg-Id) must be
	// dropped by the ledger.
	if err := pub.Publish(ctx, &events[3]); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(events[4])
	if _, err := js.Publish(ctx, "tollgate.usage.v1", raw); err != nil {
		t.Fatal(err)
	}
	// A poison message is set aside, and does not block the others.
	if _, err := js.Publish(ctx, "tollgate.usage.v1", []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	late := events[0]
	late.ID = uuid.NewString()
	if err := pub.Publish(ctx, &late); err != nil {
		t.Fatal(err)
	}
	row := waitUsage(t, store, customer, 51)
	// 0+1+...+49 from the 50 events, plus late's 0.
	if row.PromptTokens != 1225 || row.CompletionTokens != 102 {
		t.Fatalf("usage = %+v, want 1225 prompt and 102 completion tokens", row)
	}
	time.Sleep(200 * time.Millisecond) // let any stray redelivery land
	waitUsage(t, store, customer, 51)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestPublishRejectsInvalidEvents(t *testing.T) {
	js := metertest.Connect(t, metertest.NewServer(t))
	pub := meter.NewPublisher(js, meter.StreamConfig{}, time.Second)
	err := pub.Publish(context.Background(), &usage.Event{Version: 1, ID: "x"})
	if err == nil {
		t.Fatal("an invalid event was published")
	}
}

// batchSizes is a Store that records the size of each batch it is given,
// holding the first until gate is closed, before writing it to the ledger.
type batchSizes struct {
	meter.Store
	sizes chan int
	gate  chan struct{}
	held  chan struct{} // closed when the first batch is held
}

func (b *batchSizes) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	if b.sizes <- len(events); len(b.sizes) == 1 {
		close(b.held)
		<-b.gate
	}
	return b.Store.WriteEvents(ctx, events)
}

// TestWorkerWritesABacklogInBatchesOfTheBatchSize: an event that comes
// alone is written alone, after BatchWait; a backlog that builds meanwhile
// is written in batches of the batch size, each event once.
func TestWorkerWritesABacklogInBatchesOfTheBatchSize(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ledgerStore := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer, key := uuid.NewString(), uuid.NewString()
	publish := func() {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	const backlog = 3000
	store := &batchSizes{Store: ledgerStore, sizes: make(chan int, backlog), gate: make(chan struct{}), held: make(chan struct{})}
	// BatchWait well past the time a loaded machine (-race, CI) takes to
	// deliver 800 stored events: with the default 50 ms, pulls of the
	// backlog were cut at 592-723 events there and never reached 800.
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 800, WriteLanes: 1, BatchWait: time.Second})
	time.Sleep(300 * time.Millisecond) // idle
	publish()
	<-store.held // the first event's batch: the worker is busy while the backlog builds
	for range backlog - 1 {
		publish()
	}
	close(store.gate)
	row := waitUsage(t, ledgerStore, customer, backlog)
	if row.PromptTokens != backlog {
		t.Fatalf("usage = %+v, want %d prompt tokens", row, backlog)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	close(store.sizes)
	var sizes []int
	for n := range store.sizes {
		sizes = append(sizes, n)
	}
	if len(sizes) < 5 || sizes[0] != 1 || slices.Max(sizes) != 800 {
		t.Fatalf("batch sizes %v: want the first event alone, then batches of at most 800, some full", sizes)
	}
}

// TestIdleWorkerWaitsOnOnePullRequest: an idle worker waits on one pull
// request (nats.go's Consume asks for BatchSize events and waits 30 s for
// them) rather than pulling again every BatchWait, and the first event
// that comes is written.
func TestIdleWorkerWaitsOnOnePullRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	// Pull requests are messages on the JetStream API subject; the worker's
	// own connection sees them (NATS echoes a connection's publishes).
	var pulls atomic.Int64
	sub, err := js.Conn().Subscribe("$JS.API.CONSUMER.MSG.NEXT.>", func(m *nats.Msg) { pulls.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchWait: 50 * time.Millisecond})
	const idle = 2 * time.Second
	time.Sleep(idle)
	if n := pulls.Load(); n != 1 {
		t.Fatalf("an idle worker made %d pull requests in %v, want 1", n, idle)
	}
	customer := uuid.NewString()
	e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: uuid.NewString(),
		Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
		UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 3}}
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	if row := waitUsage(t, store, customer, 1); row.PromptTokens != 3 {
		t.Fatalf("usage = %+v, want 3 prompt tokens", row)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
