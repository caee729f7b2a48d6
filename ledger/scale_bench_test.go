package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BenchmarkScale loads a month of usage into a fresh ledger and measures
// the billing reads over it. TOLLGATE_BENCH_EVENTS sets the number of
// events (default 200,000; the target is 10,000,000). The data: 1,000
// customers with one key each, 20 priced models, a discount for every
// tenth customer; each event picks a customer uniformly and, 80% of the
// time, one of the customer's three usual models. Events arrive in time
// order over January 2026, as a gateway emits them (each time is the
// event's share of the month plus up to a minute of jitter), with UUIDv7
// ids like the gateway's (gateway/exchange.go). The reported metrics:
//
//   - ingest_events/s: WriteEvents in batches of 5,000, one writer;
//   - usage_{model,day}_p{50,99,max}_ms: Store.Usage for one customer's
//     month, grouped by model and by day, over 1,000 random customers
//     (the p99 is the tenth slowest; the three slowest are logged);
//   - statement_p{50,99,max}_ms, and ns/op: one customer's month statement;
//
// After loading, the benchmark runs VACUUM ANALYZE and CHECKPOINT, so the
// reads are timed in a steady state rather than behind the writes of the
// load. Progress goes to standard error every million events.
//   - export_rows/s, export_MB/s: ExportLines of the month to io.Discard;
//   - reconcile_s: Reconcile of the month;
//   - storage_B/event: usage_events partitions, event_ids and usage_hourly
//     (tables, indexes, TOAST) after VACUUM ANALYZE, divided by events;
//     rollup_rows/event: usage_hourly rows per event (1 when every event
//     has its own customer-key-model-hour).
func BenchmarkScale(b *testing.B) {
	n := 200_000
	if v := os.Getenv("TOLLGATE_BENCH_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("TOLLGATE_BENCH_EVENTS=%q is not a positive number", v)
		}
	}
	const customers, models, batch = 1000, 20, 5000
	ctx := context.Background()
	s := ledgertest.NewStore(b)
	r := rand.New(rand.NewPCG(1, 2))
	// b.Loop's start deletes metrics reported before it: keep them till after.
	type metric struct {
		v    float64
		unit string
	}
	var metrics []metric
	report := func(v float64, unit string) { metrics = append(metrics, metric{v, unit}) }
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	for m := range models {
		_, err := s.CreatePrice(ctx, ledger.PriceInput{Model: fmt.Sprintf("model-%02d", m), Currency: "USD",
			Input: ledger.FormatMicros(r.Int64N(15_000_000)), CachedInput: ledger.FormatMicros(r.Int64N(1_000_000)),
			Output: ledger.FormatMicros(r.Int64N(60_000_000)), EffectiveFrom: jan})
		must(err)
	}
	type account struct {
		customer, key string
		usual         [3]int
	}
	accounts := make([]account, customers)
	for i := range accounts {
		c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: fmt.Sprintf("customer-%04d", i)})
		must(err)
		k, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "default"})
		must(err)
		if i%10 == 0 {
			_, err = s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "15", EffectiveFrom: jan})
			must(err)
		}
		accounts[i] = account{c.ID, k.ID, [3]int{r.IntN(models), r.IntN(models), r.IntN(models)}}
	}

	start := time.Now()
	events := make([]usage.Event, 0, batch)
	month := int64(feb.Sub(jan))
	for i := range n {
		a := accounts[r.IntN(customers)]
		model := a.usual[r.IntN(3)]
		if r.IntN(5) == 0 {
			model = r.IntN(models)
		}
		prompt := 50 + r.Int64N(8000)
		completion := r.Int64N(2000)
		id, err := uuid.NewV7()
		must(err)
		at := jan.Add(time.Duration((month - int64(time.Minute)) / int64(n) * int64(i))).Add(time.Duration(r.Int64N(int64(time.Minute))))
		events = append(events, usage.Event{Version: usage.SchemaVersion, ID: id.String(),
			Time: at, CustomerID: a.customer, KeyID: a.key, Provider: "sim",
			Model: fmt.Sprintf("model-%02d", model), Endpoint: "/v1/chat/completions", Stream: true,
			Status: usage.StatusOK, HTTPStatus: 200, FinishReason: "stop", UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: prompt, CachedTokens: r.Int64N(prompt / 2), CompletionTokens: completion,
				ReasoningTokens: r.Int64N(completion/4 + 1)}, TTFTMillis: 200, DurationMillis: 1500})
		if len(events) == batch || i == n-1 {
			_, err := s.WriteEvents(ctx, events)
			must(err)
			events = events[:0]
		}
		if (i+1)%1_000_000 == 0 {
			fmt.Fprintf(os.Stderr, "scale: %d events written, %.0f events/s\n", i+1, float64(i+1)/time.Since(start).Seconds())
		}
	}
	report(float64(n)/time.Since(start).Seconds(), "ingest_events/s")
	must(s.ExecForTest(ctx, "VACUUM ANALYZE"))
	must(s.ExecForTest(ctx, "CHECKPOINT"))
	fmt.Fprintf(os.Stderr, "scale: loaded, vacuumed and checkpointed after %s; timing reads\n", time.Since(start).Round(time.Second))

	sample := make([]string, 1000)
	for i := range sample {
		sample[i] = accounts[r.IntN(customers)].customer
	}
	latency := func(name string, f func(customer string) error) {
		type timing struct {
			d        time.Duration
			customer string
		}
		var ts []timing
		for _, c := range sample {
			t0 := time.Now()
			must(f(c))
			ts = append(ts, timing{time.Since(t0), c})
		}
		slices.SortFunc(ts, func(a, b timing) int { return int(a.d - b.d) })
		report(ms(ts[len(ts)/2].d), name+"_p50_ms")
		report(ms(ts[len(ts)*99/100].d), name+"_p99_ms")
		report(ms(ts[len(ts)-1].d), name+"_max_ms")
		for _, t := range ts[len(ts)-3:] {
			fmt.Fprintf(os.Stderr, "scale: %s slowest: %s for customer %s\n", name, t.d.Round(time.Microsecond), t.customer)
		}
	}
	for _, g := range []string{"model", "day"} {
		latency("usage_"+g, func(c string) error {
			_, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c, From: jan, To: feb, GroupBy: g})
			return err
		})
	}
	latency("statement", func(c string) error {
		_, err := s.Statement(ctx, c, "2026-01")
		return err
	})

	cw := &countingWriter{}
	t0 := time.Now()
	rows, err := s.ExportLines(ctx, jan, feb, cw)
	must(err)
	elapsed := time.Since(t0).Seconds()
	report(float64(rows)/elapsed, "export_rows/s")
	report(float64(cw.n)/elapsed/1e6, "export_MB/s")

	t0 = time.Now()
	rec, err := s.Reconcile(ctx, jan, feb)
	must(err)
	if !rec.Clean || rec.Events != int64(n) {
		b.Fatalf("reconciliation of the generated month: %+v", rec)
	}
	report(time.Since(t0).Seconds(), "reconcile_s")

	size, err := s.QueryInt64ForTest(ctx, `
		SELECT (SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'usage_events'::regclass)
		  + pg_total_relation_size('event_ids') + pg_total_relation_size('usage_hourly')`)
	must(err)
	report(float64(size)/float64(n), "storage_B/event")
	rollups, err := s.QueryInt64ForTest(ctx, `SELECT count(*) FROM usage_hourly`)
	must(err)
	report(float64(rollups)/float64(n), "rollup_rows/event")

	i := 0
	for b.Loop() {
		_, err := s.Statement(ctx, sample[i%len(sample)], "2026-01")
		must(err)
		i++
	}
	for _, m := range metrics {
		b.ReportMetric(m.v, m.unit)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
