package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// BenchmarkRerate re-rates a month holding TOLLGATE_BENCH_EVENTS events
// (default 200,000; BenchmarkMeter's kind: 1,000 customers, 20 models,
// spread evenly over February) after every model got a new price from the
// 1st (adjust=all: every event gets a rerate entry), and before that with
// the prices they were rated at (adjust=none: every event is read, none
// adjusted). Run it with -benchtime 1x: a second re-rating of the same
// month adjusts nothing. Metrics: events/s examined, and the seconds the
// re-rating took.
func BenchmarkRerate(b *testing.B) {
	n := benchEnvInt(b, "TOLLGATE_BENCH_EVENTS", 200_000)
	ctx := context.Background()
	r := newMeterRig(b, 1000, 20, false)
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	mar := feb.AddDate(0, 1, 0)
	events := r.events(3, n, feb, mar.Sub(feb)/time.Duration(n))
	for len(events) > 0 {
		k := min(6000, len(events))
		if _, err := r.store.WriteEvents(ctx, events[:k]); err != nil {
			b.Fatal(err)
		}
		events = events[k:]
	}
	if err := r.store.ExecForTest(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	// First with the prices the events were rated at (every event read,
	// none adjusted), then after every model got a new price from the 1st
	// (every event adjusted).
	for _, adjust := range []string{"none", "all"} {
		if adjust == "all" {
			for m := range r.models {
				if _, err := r.store.CreatePrice(ctx, ledger.PriceInput{Model: fmt.Sprintf("model-%02d", m), Currency: "USD",
					Input: "1", Output: "2", EffectiveFrom: feb}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run("adjust="+adjust, func(b *testing.B) {
			var res ledger.RerateResult
			t0 := time.Now()
			for range b.N {
				var err error
				if res, err = r.store.Rerate(ctx, feb, mar, nil); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			if res.Examined != n || (adjust == "all") != (res.Adjusted == n) {
				b.Fatalf("examined %d, adjusted %d of %d events", res.Examined, res.Adjusted, n)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/rerate")
		})
	}
}
