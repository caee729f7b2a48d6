package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
)

// TestMeterSmoke runs the meter benchmark's path at a tiny size and checks
// it: 2,000 events published, 100 of them again without a Nats-Msg-Id (so
// that only the ledger can refuse them), drained by two workers: every
// event is in the ledger exactly once, the repeats are counted as
// duplicates, and the month reconciles.
func TestMeterSmoke(t *testing.T) {
	const n, again = 2000, 100
	ctx := context.Background()
	r := newMeterRig(t, 50, 5, true)
	start := time.Now().UTC()
	events := r.events(3, n, start, 20*time.Microsecond)
	r.publish(t, events, 16)
	for i := range again {
		raw, err := json.Marshal(&events[i*7])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.js.Publish(ctx, "tollgate.usage.v1", raw); err != nil {
			t.Fatal(err)
		}
	}
	cs := newCountingStore(r.store, n)
	wc := defaultWorkerConfig(t)
	wc.BatchSize = 300
	stop := r.runWorkers(t, 2, cs, wc)
	select {
	case <-cs.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d of %d events written after 60s", cs.written.Load(), n)
	}
	// The repeats come after the originals in the stream: wait for them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := r.store.QueryInt64ForTest(ctx, `SELECT coalesce(sum(value), 0) FROM ingest_counters WHERE name = 'duplicates'`)
		if err != nil {
			t.Fatal(err)
		}
		if d == again {
			break
		}
		if d > again || time.Now().After(deadline) {
			t.Fatalf("duplicates counted = %d, want %d", d, again)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	for _, q := range []string{
		`SELECT count(*) FROM usage_events`,
		`SELECT count(DISTINCT id) FROM usage_events`,
		`SELECT count(*) FROM event_ids`,
		`SELECT sum(requests) FROM usage_hourly`,
	} {
		got, err := r.store.QueryInt64ForTest(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("%s = %d, want %d", q, got, n)
		}
	}
	var promptSum int64
	for i := range events {
		promptSum += events[i].Usage.PromptTokens
	}
	got, err := r.store.QueryInt64ForTest(ctx, `SELECT sum(prompt_tokens) FROM usage_hourly`)
	if err != nil || got != promptSum {
		t.Errorf("rollups' prompt tokens = %d (%v), want %d", got, err, promptSum)
	}
	month := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, time.UTC)
	rec, err := r.store.Reconcile(ctx, month, month.AddDate(0, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Clean || rec.Events != n || rec.DuplicatesRejected != again {
		t.Errorf("reconciliation: %+v", rec)
	}
}

// benchEnvInt reads a positive integer from the environment, or def.
func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}

// BenchmarkMeter measures the meter's throughput: b.N events (run it with
// -benchtime 100000x, say) for 1,000 customers and 20 models, as the gateway
// makes them (UUIDv7 ids, in time order, as if produced at 50,000 events/s),
// are first published to a fresh usage stream with meter.Publisher from 64
// goroutines; then W meter workers (meter.Worker, the defaults of
// meter.Config, one durable consumer) start and write them through
// Store.WriteEvents into a fresh database. JetStream runs in a process of
// its own (see natsdEnv). The timer runs from the workers' start (their
// first fetch) to the commit that completes the last event; after it, the
// ledger must hold every event exactly once. Metrics:
//
//   - ns/op, allocs/op, B/op: per event, in this process (the workers and
//     their NATS client; nothing else runs in it meanwhile);
//   - events/s: b.N over the timed span;
//   - worker_cpu_s/1M, nats_cpu_s/1M, pg_cpu_s/1M: CPU seconds per million
//     events of this process, the NATS server process and the database's
//     Postgres backends (not Postgres's shared background processes);
//   - events/batch: mean events per ledger transaction;
//   - publish_events/s: the publishing before the timer (not the meter);
//   - machine_busy_%: the whole machine's CPU busy (all CPUs, any process)
//     over the timed span; others_busy_%: the part of it not spent by the
//     three processes above: the other tenants of a shared machine.
//
// TOLLGATE_BENCH_METER_BATCH=N and TOLLGATE_BENCH_METER_LANES=N override
// the workers' batch size and write lanes (meter.WorkerConfig), and
// TOLLGATE_BENCH_METER_PENDING=N and TOLLGATE_BENCH_METER_WAIT_MS=N their
// MaxAckPending and BatchWait (in milliseconds).
// TOLLGATE_BENCH_METER_PROFILE=FILE writes a CPU profile of the timed span
// alone (not the set-up and publishing that -cpuprofile would include) to
// FILE.workersW.
func BenchmarkMeter(b *testing.B) {
	wc := defaultWorkerConfig(b)
	if v := os.Getenv("TOLLGATE_BENCH_METER_BATCH"); v != "" {
		wc.BatchSize = benchEnvInt(b, "TOLLGATE_BENCH_METER_BATCH", 0)
		wc.MaxAckPending = max(wc.MaxAckPending, 4*wc.BatchSize)
	}
	if v := os.Getenv("TOLLGATE_BENCH_METER_LANES"); v != "" {
		wc.WriteLanes = benchEnvInt(b, "TOLLGATE_BENCH_METER_LANES", 0)
	}
	if v := os.Getenv("TOLLGATE_BENCH_METER_PENDING"); v != "" {
		wc.MaxAckPending = benchEnvInt(b, "TOLLGATE_BENCH_METER_PENDING", 0)
	}
	if v := os.Getenv("TOLLGATE_BENCH_METER_WAIT_MS"); v != "" {
		wc.BatchWait = time.Duration(benchEnvInt(b, "TOLLGATE_BENCH_METER_WAIT_MS", 0)) * time.Millisecond
	}
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchmarkMeter(b, workers, wc)
		})
	}
}

func benchmarkMeter(b *testing.B, workers int, wc meter.WorkerConfig) {
	b.StopTimer()
	ctx := context.Background()
	r := newMeterRig(b, 1000, 20, true)
	events := r.events(uint64(workers), b.N, time.Now(), 20*time.Microsecond)
	pubRate := r.publish(b, events, 64)
	cs := newCountingStore(r.store, b.N)
	if f := os.Getenv("TOLLGATE_BENCH_METER_PROFILE"); f != "" {
		out, err := os.Create(fmt.Sprintf("%s.workers%d", f, workers))
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu := r.startCPU(b)
	b.StartTimer()
	t0 := time.Now()
	stop := r.runWorkers(b, workers, cs, wc)
	select {
	case <-cs.done:
	case <-time.After(30 * time.Minute):
		b.Fatalf("%d of %d events written after 30 minutes", cs.written.Load(), b.N)
	}
	b.StopTimer()
	pprof.StopCPUProfile()
	elapsed := cs.at.Sub(t0)
	cpu.stop(b)
	stop()
	for _, q := range []string{`SELECT count(*) FROM usage_events`, `SELECT sum(requests) FROM usage_hourly`} {
		got, err := r.store.QueryInt64ForTest(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if got != int64(b.N) {
			b.Fatalf("%s = %d, want %d", q, got, b.N)
		}
	}
	perM := 1e6 / float64(b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(cpu.Self*perM, "worker_cpu_s/1M")
	b.ReportMetric(cpu.NATS*perM, "nats_cpu_s/1M")
	b.ReportMetric(cpu.PG*perM, "pg_cpu_s/1M")
	b.ReportMetric(float64(b.N)/float64(cs.batches.Load()), "events/batch")
	b.ReportMetric(pubRate, "publish_events/s")
	b.ReportMetric(100*cpu.MachineBusy, "machine_busy_%")
	b.ReportMetric(100*cpu.Others, "others_busy_%")
}

// BenchmarkMeterLag measures the end-to-end lag at a fixed rate: for
// TOLLGATE_BENCH_LAG_SECONDS (default 30) seconds, events are published at
// TOLLGATE_BENCH_LAG_RATE (default 5,000) events/s while one meter worker
// with the default configuration (as tollgate serve runs it; the batch
// size from TOLLGATE_BENCH_METER_BATCH when set) writes them
// into a fresh ledger, and a poller reads Store.Usage grouped by customer
// (the query behind GET /admin/v1/usage?group_by=customer) every 20 ms (or
// as soon as the previous poll ends, when it took longer).
//
// Method: a pacer schedules event i at start + i/rate for a customer picked
// uniformly among 1,000; each customer's events are published one after
// the other, each waiting for its PubAck, by the one of 100 publishing
// goroutines that owns the customer, so a customer's events are in the
// stream in their publishing order. An event's publish time is when
// Publisher.Publish is called. Its prompt_tokens is its number among its
// customer's events (1, 2, ...). A poll that shows a customer with c
// requests and a prompt sum of c(c+1)/2 shows exactly that customer's
// first c events (the only c of them with that sum); every poll is checked
// for it. An event's visible time is the start of the first poll that
// shows it (the poll's snapshot is taken after its start), so the lag is
// overstated by at most one poll interval, whose mean is reported as
// poll_ms. Metrics: lag
// p50/p90/p99/max in ms over all events; the publish rate achieved; the
// PubAck wait p99; the polls' mean interval; the mean events per ledger
// transaction and the p50/p99 time of one (Store.WriteEvents); the
// machine's CPU busy and the part of it other tenants took (as in
// BenchmarkMeter; here this process also publishes and polls).
func BenchmarkMeterLag(b *testing.B) {
	const pollEvery = 20 * time.Millisecond
	seconds := benchEnvInt(b, "TOLLGATE_BENCH_LAG_SECONDS", 30)
	rate := benchEnvInt(b, "TOLLGATE_BENCH_LAG_RATE", 5000)
	const customers, publishers = 1000, 100
	ctx := context.Background()
	r := newMeterRig(b, customers, 20, true)
	n := seconds * rate
	type sent struct {
		customer int
		seq      int64 // among the customer's events, from 1
		pub, ack time.Time
		visible  time.Time
	}
	plan := make([]sent, n)
	perCustomer := make([][]int, customers) // event numbers by customer, in order
	rnd := rand.New(rand.NewPCG(9, 9))
	for i := range plan {
		c := rnd.IntN(customers)
		perCustomer[c] = append(perCustomer[c], i)
		plan[i] = sent{customer: c, seq: int64(len(perCustomer[c]))}
	}
	{ // once: run it with -benchtime 1x
		wc := defaultWorkerConfig(b)
		if os.Getenv("TOLLGATE_BENCH_METER_BATCH") != "" {
			wc.BatchSize = benchEnvInt(b, "TOLLGATE_BENCH_METER_BATCH", 0)
		}
		cs := newCountingStore(r.store, n)
		stopWorker := r.runWorkers(b, 1, cs, wc)
		pub := meter.NewPublisher(r.js, r.stream, 30*time.Second)
		queues := make([]chan int, publishers)
		var wg sync.WaitGroup
		for p := range queues {
			queues[p] = make(chan int, 4096)
			wg.Go(func() {
				prnd := rand.New(rand.NewPCG(uint64(p), 1))
				for i := range queues[p] {
					s := &plan[i]
					a := r.accounts[s.customer]
					s.pub = time.Now()
					e := r.event(prnd, a, s.pub)
					e.Usage.PromptTokens, e.Usage.CachedTokens = s.seq, 0
					if err := pub.Publish(ctx, &e); err != nil {
						b.Error(err)
						return
					}
					s.ack = time.Now()
				}
			})
		}
		pollCtx, stopPoll := context.WithCancel(ctx)
		var polls int
		var pollSpan time.Duration
		pollDone := make(chan error, 1)
		go func() {
			seen := make([]int64, customers)
			index := make(map[string]int, customers)
			for i, a := range r.accounts {
				index[a.customer] = i
			}
			t0 := time.Now()
			tick := time.NewTicker(pollEvery)
			defer tick.Stop()
			for pollCtx.Err() == nil {
				<-tick.C
				at := time.Now()
				page, err := r.store.Usage(pollCtx, ledger.UsageQuery{GroupBy: "customer", Limit: 1000})
				if err != nil {
					if pollCtx.Err() != nil {
						break
					}
					pollDone <- err
					return
				}
				polls++
				for _, row := range page.Data {
					c := index[row.Group]
					if row.PromptTokens != row.Requests*(row.Requests+1)/2 {
						pollDone <- fmt.Errorf("customer %s: %d requests with a prompt sum of %d: not its first events",
							row.Group, row.Requests, row.PromptTokens)
						return
					}
					for k := seen[c]; k < row.Requests; k++ {
						plan[perCustomer[c][k]].visible = at
					}
					seen[c] = row.Requests
				}
				var total int64
				for _, v := range seen {
					total += v
				}
				if total == int64(n) {
					break
				}
			}
			pollSpan = time.Since(t0)
			pollDone <- nil
		}()
		cpu := r.startCPU(b)
		start := time.Now()
		for i := range plan {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
			queues[plan[i].customer%publishers] <- i
		}
		for _, q := range queues {
			close(q)
		}
		wg.Wait()
		published := time.Since(start)
		select {
		case err := <-pollDone:
			if err != nil {
				b.Fatal(err)
			}
		case <-time.After(5 * time.Minute):
			b.Fatal("the ledger did not show every event within 5 minutes")
		}
		stopPoll()
		cpu.stop(b)
		stopWorker()

		lags := make([]time.Duration, n)
		acks := make([]time.Duration, n)
		for i, s := range plan {
			if s.visible.IsZero() {
				b.Fatalf("event %d never seen", i)
			}
			lags[i] = max(s.visible.Sub(s.pub), 0) // a poll started before the publish call: 0
			acks[i] = s.ack.Sub(s.pub)
		}
		// The lag's p99 by 5 s of publishing, to see a trend.
		var trend []string
		for lo := 0; lo < n; lo += 5 * rate {
			w := slices.Clone(lags[lo:min(lo+5*rate, n)])
			slices.Sort(w)
			trend = append(trend, fmt.Sprintf("%.0f", ms(w[len(w)*99/100])))
		}
		b.Logf("lag p99 ms by 5 s: %v", trend)
		slices.Sort(lags)
		slices.Sort(acks)
		q := func(d []time.Duration, p float64) float64 { return ms(d[min(int(float64(len(d))*p), len(d)-1)]) }
		b.ReportMetric(q(lags, 0.50), "lag_p50_ms")
		b.ReportMetric(q(lags, 0.90), "lag_p90_ms")
		b.ReportMetric(q(lags, 0.99), "lag_p99_ms")
		b.ReportMetric(ms(lags[n-1]), "lag_max_ms")
		b.ReportMetric(float64(n)/published.Seconds(), "published_events/s")
		b.ReportMetric(q(acks, 0.99), "puback_p99_ms")
		b.ReportMetric(ms(pollSpan)/float64(polls), "poll_ms")
		slices.Sort(cs.took)
		b.ReportMetric(float64(n)/float64(len(cs.took)), "events/batch")
		b.ReportMetric(q(cs.took, 0.50), "write_p50_ms")
		b.ReportMetric(q(cs.took, 0.99), "write_p99_ms")
		b.ReportMetric(100*cpu.MachineBusy, "machine_busy_%")
		b.ReportMetric(100*cpu.Others, "others_busy_%")
	}
}

// BenchmarkMeterExplain writes TOLLGATE_BENCH_EVENTS (default 100,000)
// events of the meter benchmark's kind in batches of the default size,
// then logs Postgres's EXPLAIN (ANALYZE, BUFFERS, WAL) of the next batch:
// where the database spends a batch's time. Run it with -benchtime 1x -v.
func BenchmarkMeterExplain(b *testing.B) {
	n := benchEnvInt(b, "TOLLGATE_BENCH_EVENTS", 100_000)
	ctx := context.Background()
	r := newMeterRig(b, 1000, 20, false)
	batch := defaultWorkerConfig(b).BatchSize
	events := r.events(1, n+batch, time.Now(), 20*time.Microsecond)
	for len(events) > batch {
		if _, err := r.store.WriteEvents(ctx, events[:batch]); err != nil {
			b.Fatal(err)
		}
		events = events[batch:]
	}
	plan, err := r.store.ExplainWriteForTest(ctx, events)
	if err != nil {
		b.Fatal(err)
	}
	b.Log("\n" + plan)
}

// BenchmarkMeterWrite is the ledger's share of the meter alone: b.N events
// of BenchmarkMeter's kind written by one writer calling Store.WriteEvents
// in batches of the worker's default size (TOLLGATE_BENCH_METER_BATCH
// overrides it), into a fresh database: staged by COPY into a temporary
// table first (write=copy, what WriteEvents does) and, in the same run, as
// one statement of column arrays (write=array, how it was done before). Metrics: ns/op and allocs/op per
// event; events/s; pg_cpu_s/1M, the database's backends' CPU seconds per
// million events; go_cpu_s/1M, this process's.
func BenchmarkMeterWrite(b *testing.B) {
	batch := defaultWorkerConfig(b).BatchSize
	if os.Getenv("TOLLGATE_BENCH_METER_BATCH") != "" {
		batch = benchEnvInt(b, "TOLLGATE_BENCH_METER_BATCH", 0)
	}
	for _, way := range []string{"array", "copy"} {
		b.Run("write="+way, func(b *testing.B) {
			b.StopTimer()
			ctx := context.Background()
			r := newMeterRig(b, 1000, 20, false)
			write := r.store.WriteEvents // copy: staged, what WriteEvents does
			if way == "array" {
				write = r.store.WriteEventsArraysForTest
			}
			events := r.events(5, b.N, time.Now(), 20*time.Microsecond)
			cpu := r.startCPU(b)
			b.StartTimer()
			t0 := time.Now()
			for len(events) > 0 {
				k := min(batch, len(events))
				if _, err := write(ctx, events[:k]); err != nil {
					b.Fatal(err)
				}
				events = events[k:]
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			cpu.stop(b)
			perM := 1e6 / float64(b.N)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(cpu.PG*perM, "pg_cpu_s/1M")
			b.ReportMetric(cpu.Self*perM, "go_cpu_s/1M")
		})
	}
}
