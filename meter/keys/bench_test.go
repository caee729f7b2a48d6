package keys_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BenchmarkPropagation measures, per revocation, the time from the start
// of the ledger's revoking transaction to the moment each of two gateways'
// caches refuses the key, with the admin API's sequence (revoke, then
// Syncer.Wait). It reports the p50, p99 and max of those times, and of
// the revoke-and-wait call alone.
func BenchmarkPropagation(b *testing.B) {
	r := rigFor(b)
	ctx := context.Background()
	sync := r.syncer()
	a, g := r.cache(nil), r.cache(nil)
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	type key struct{ id, secret string }
	ks := make([]key, b.N)
	for i := range ks {
		k, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
		if err != nil {
			b.Fatal(err)
		}
		ks[i] = key{k.ID, secret}
	}
	if err := sync.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	var applied, calls []time.Duration
	b.ResetTimer()
	for _, k := range ks {
		start := time.Now()
		done := make(chan time.Duration, 2)
		for _, cache := range []*keys.Cache{a, g} {
			go func() {
				for {
					if _, ok := cache.LookupKey(k.secret); !ok {
						done <- time.Since(start)
						return
					}
					time.Sleep(20 * time.Microsecond)
				}
			}()
		}
		rk, err := r.store.RevokeKey(ctx, k.id)
		if err == nil {
			err = sync.Wait(ctx, rk.Change)
		}
		if err != nil {
			b.Fatal(err)
		}
		calls = append(calls, time.Since(start))
		applied = append(applied, <-done, <-done)
	}
	b.StopTimer()
	report(b, "applied", applied)
	report(b, "call", calls)
}

// report adds the p50, p99 and max of ds, in milliseconds, to b's output.
func report(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	q := func(f float64) float64 {
		return float64(ds[min(len(ds)-1, int(f*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, name+"-max-ms")
}

// BenchmarkShareDelivery measures δ, the time from one gateway's publishing
// a key's counts to another's adding them (over a JetStream server's core
// NATS, in process): how far a limit can be overshot across gateways is
// what they admit within δ. It reports the p50, p99 and max.
func BenchmarkShareDelivery(b *testing.B) {
	shares := newShares(b, 2)
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Requests: int64(i + 1)}})
		for {
			if r, _, _ := othersSums(shares[1], "k"); r == int64(i+1) {
				break
			}
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	report(b, "delta", ds)
}
