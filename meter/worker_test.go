package meter_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// waitUsage polls the ledger until the customer's usage has want requests.
func waitUsage(t *testing.T, s *ledger.Store, customer string, want int64) ledger.UsageRow {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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
			t.Fatalf("usage = %+v, want %d requests", rows, want)
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

// batchSizes is a Store that records the size of each batch it is given
// before writing it to the ledger.
type batchSizes struct {
	meter.Store
	sizes chan int
}

func (b *batchSizes) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	b.sizes <- len(events)
	return b.Store.WriteEvents(ctx, events)
}

// TestWorkerPullsGrowToTheBatchSize: a worker that starts on a backlog
// pulls small batches first (see nextPull) and reaches its batch size,
// and writes the whole backlog once.
func TestWorkerPullsGrowToTheBatchSize(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ledgerStore := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer, key := uuid.NewString(), uuid.NewString()
	const backlog = 3000
	for range backlog {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	store := &batchSizes{Store: ledgerStore, sizes: make(chan int, backlog)}
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 800, WriteLanes: 1})
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
	biggest := 0
	for n := range store.sizes {
		sizes = append(sizes, n)
		biggest = max(biggest, n)
	}
	if sizes[0] > 64 || biggest != 800 {
		t.Fatalf("batch sizes %v: want the first at most 64 and the biggest 800", sizes)
	}
}
