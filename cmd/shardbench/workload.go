package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The workload is BenchmarkMeter's (ledger/meter_rig_test.go): customers
// with one key each, a 15% discount for every tenth, models priced from
// January 2026, and events as the gateway makes them, each for a customer
// picked uniformly, 80% of them on one of its three usual models.

var priceFrom = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// account is one customer with its key, usual models and ledger shard.
type account struct {
	customer, key string
	usual         [3]int
	shard         int
}

// seedPrices writes the price book, the same on every shard (it is small
// and every shard rates with it).
func seedPrices(ctx context.Context, s *ledger.Store, models int) error {
	rnd := rand.New(rand.NewPCG(1, 2))
	for m := range models {
		_, err := s.CreatePrice(ctx, ledger.PriceInput{Model: modelName(m), Currency: "USD",
			Input: ledger.FormatMicros(rnd.Int64N(15_000_000)), CachedInput: ledger.FormatMicros(rnd.Int64N(1_000_000)),
			Output: ledger.FormatMicros(rnd.Int64N(60_000_000)), EffectiveFrom: priceFrom})
		if err != nil {
			return fmt.Errorf("price %d: %w", m, err)
		}
	}
	return nil
}

func modelName(m int) string { return fmt.Sprintf("model-%02d", m) }

// seedCustomers creates, on shard k's store, those of the customers
// customer-0000 ... customer-<total-1> that the directory places there.
func seedCustomers(ctx context.Context, s *ledger.Store, dir *directory, k, models, total int) ([]account, error) {
	var out []account
	for i := range total {
		name := fmt.Sprintf("customer-%04d", i)
		if dir.place(name) != k {
			continue
		}
		rnd := rand.New(rand.NewPCG(uint64(i), 3))
		c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: name})
		if err != nil {
			return nil, err
		}
		key, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "default"})
		if err != nil {
			return nil, err
		}
		if i%10 == 0 {
			if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "15", EffectiveFrom: priceFrom}); err != nil {
				return nil, err
			}
		}
		out = append(out, account{c.ID, key.ID, [3]int{rnd.IntN(models), rnd.IntN(models), rnd.IntN(models)}, k})
	}
	return out, nil
}

// makeEvents makes n events in time order, one every step from start,
// each for an account picked uniformly.
func makeEvents(seed uint64, accounts []account, models, n int, start time.Time, step time.Duration) []usage.Event {
	rnd := rand.New(rand.NewPCG(seed, 7))
	out := make([]usage.Event, n)
	for i := range out {
		a := accounts[rnd.IntN(len(accounts))]
		model := a.usual[rnd.IntN(3)]
		if rnd.IntN(5) == 0 {
			model = rnd.IntN(models)
		}
		prompt := 50 + rnd.Int64N(8000)
		completion := rnd.Int64N(2000)
		id, _ := uuid.NewV7()
		out[i] = usage.Event{Version: usage.SchemaVersion, ID: id.String(), Time: start.Add(time.Duration(i) * step).UTC(),
			CustomerID: a.customer, KeyID: a.key, Provider: "sim", Model: modelName(model),
			ServedModel: modelName(model) + "-2026-01-01", Endpoint: "/v1/chat/completions", Stream: true,
			Status: usage.StatusOK, HTTPStatus: 200, FinishReason: "stop", UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: prompt, CachedTokens: rnd.Int64N(prompt / 2),
				CompletionTokens: completion, ReasoningTokens: rnd.Int64N(completion/4 + 1)},
			TTFTMillis: 150 + rnd.Int64N(400), DurationMillis: 1000 + rnd.Int64N(9000)}
	}
	return out
}

// publish publishes every event to its customer's shard subject with
// meter.Publisher (as the gateway does, waiting for each PubAck) from the
// given number of goroutines, and returns the rate in events/s.
func publish(ctx context.Context, js jetstream.JetStream, dir *directory, events []usage.Event, goroutines int) (float64, error) {
	pubs := make([]*meter.Publisher, dir.shards)
	for k := range pubs {
		pubs[k] = meter.NewPublisher(js, shardStreamConfig(k), 30*time.Second)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	t0 := time.Now()
	for range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(events)) {
					return
				}
				k, ok := dir.shard(events[i].CustomerID)
				if !ok {
					errs <- fmt.Errorf("event %s: customer %s has no shard", events[i].ID, events[i].CustomerID)
					return
				}
				if err := pubs[k].Publish(ctx, &events[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return float64(len(events)) / time.Since(t0).Seconds(), nil
}

// shardStreamConfig is shard k's usage stream, otherwise meter's defaults.
func shardStreamConfig(k int) meter.StreamConfig {
	return meter.StreamConfig{Name: shardStream(k), Subject: shardSubject(k)}
}

// countingStore is a shard's ledger as its workers see it, counting the
// new events committed and noting when the count reaches the target.
type countingStore struct {
	s       meter.Store
	target  int64
	written atomic.Int64
	batches atomic.Int64
	once    sync.Once
	done    chan struct{}
	at      time.Time // when written reached target
}

func newCountingStore(s meter.Store, target int) *countingStore {
	c := &countingStore{s: s, target: int64(target), done: make(chan struct{})}
	if target == 0 {
		c.at = time.Now()
		close(c.done)
	}
	return c
}

// WriteEvents is the store's, counted.
func (c *countingStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	n, err := c.s.WriteEvents(ctx, events)
	if err == nil {
		c.batches.Add(1)
		if c.written.Add(int64(n)) >= c.target {
			c.once.Do(func() { c.at = time.Now(); close(c.done) })
		}
	}
	return n, err
}

var _ meter.Store = (*countingStore)(nil)
