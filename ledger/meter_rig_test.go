package ledger_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The meter rig: the real metering path (meter.Publisher → a JetStream
// stream made by meter.EnsureStream → meter.Worker → Store.WriteEvents)
// over a fresh database and a fresh JetStream server, with the customers,
// keys and prices of BenchmarkScale. The smoke test, BenchmarkMeter and
// BenchmarkMeterLag share it.

// natsdEnv, when set in the environment of this test binary, makes it a
// NATS server (meter.StartEmbedded, the server tollgate embeds) with its
// storage in the directory named, instead of running tests: the meter
// benchmarks run JetStream in a process of its own, so that its CPU time,
// allocations and profile are not mixed with the worker's.
const natsdEnv = "TOLLGATE_TEST_NATSD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(natsdEnv); dir != "" {
		runNATSD(dir)
		return
	}
	os.Exit(m.Run())
}

// runNATSD serves JetStream until its standard input closes (the parent
// test process ended), printing its client URL first.
func runNATSD(dir string) {
	s, err := meter.StartEmbedded(dir, "127.0.0.1:0", meter.SyncPolicy{}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(s.ClientURL())
	_, _ = bufio.NewReader(os.Stdin).ReadString(0)
	s.Shutdown()
	s.WaitForShutdown()
}

// startNATSD starts this test binary as a NATS server process (see
// natsdEnv), stopped when the test ends, and returns its URL and pid.
func startNATSD(tb testing.TB) (string, int) {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), natsdEnv+"="+tb.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("nats server process: %v", err)
	}
	return strings.TrimSpace(url), cmd.Process.Pid
}

// rigAccount is one customer with its key and usual models.
type rigAccount struct {
	customer, key string
	usual         [3]int
}

// meterRig is a fresh ledger and JetStream server with the usage stream.
type meterRig struct {
	store    *ledger.Store
	js       jetstream.JetStream
	stream   meter.StreamConfig
	accounts []rigAccount
	models   int
	natsPID  int // 0: in this process
}

// newMeterRig sets up customers (one key each, a 15% discount for every
// tenth) and models priced from January 2026, a JetStream server (its own
// process when separate, else embedded here) and the usage stream.
func newMeterRig(tb testing.TB, customers, models int, separate bool) *meterRig {
	tb.Helper()
	ctx := context.Background()
	r := &meterRig{store: ledgertest.NewStore(tb), models: models}
	rnd := rand.New(rand.NewPCG(1, 2))
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	for m := range models {
		_, err := r.store.CreatePrice(ctx, ledger.PriceInput{Model: fmt.Sprintf("model-%02d", m), Currency: "USD",
			Input: ledger.FormatMicros(rnd.Int64N(15_000_000)), CachedInput: ledger.FormatMicros(rnd.Int64N(1_000_000)),
			Output: ledger.FormatMicros(rnd.Int64N(60_000_000)), EffectiveFrom: jan})
		must(err)
	}
	r.accounts = make([]rigAccount, customers)
	for i := range r.accounts {
		c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: fmt.Sprintf("customer-%04d", i)})
		must(err)
		k, _, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "default"})
		must(err)
		if i%10 == 0 {
			_, err = r.store.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "15", EffectiveFrom: jan})
			must(err)
		}
		r.accounts[i] = rigAccount{c.ID, k.ID, [3]int{rnd.IntN(models), rnd.IntN(models), rnd.IntN(models)}}
	}
	// Current statistics, as a running ledger has (a fresh database's
	// first batches would otherwise be planned on none).
	must(r.store.ExecForTest(ctx, "ANALYZE"))
	if separate {
		var url string
		url, r.natsPID = startNATSD(tb)
		nc, err := nats.Connect(url)
		must(err)
		tb.Cleanup(nc.Close)
		r.js, err = jetstream.New(nc)
		must(err)
	} else {
		r.js = metertest.Connect(tb, metertest.NewServer(tb))
	}
	_, err := meter.EnsureStream(ctx, r.js, r.stream)
	must(err)
	return r
}

// event makes one realistic event of account a at time at, as the gateway
// makes them (gateway/exchange.go: a UUIDv7 id): 80% of the time one of
// the account's three usual models.
func (r *meterRig) event(rnd *rand.Rand, a rigAccount, at time.Time) usage.Event {
	model := a.usual[rnd.IntN(3)]
	if rnd.IntN(5) == 0 {
		model = rnd.IntN(r.models)
	}
	prompt := 50 + rnd.Int64N(8000)
	completion := rnd.Int64N(2000)
	id, _ := uuid.NewV7()
	return usage.Event{Version: usage.SchemaVersion, ID: id.String(), Time: at.UTC(), CustomerID: a.customer,
		KeyID: a.key, Provider: "sim", Model: fmt.Sprintf("model-%02d", model), ServedModel: fmt.Sprintf("model-%02d-2026-01-01", model),
		Endpoint: "/v1/chat/completions", Stream: true, Status: usage.StatusOK, HTTPStatus: 200, FinishReason: "stop",
		UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: prompt, CachedTokens: rnd.Int64N(prompt / 2),
			CompletionTokens: completion, ReasoningTokens: rnd.Int64N(completion/4 + 1)},
		TTFTMillis: 150 + rnd.Int64N(400), DurationMillis: 1000 + rnd.Int64N(9000)}
}

// events makes n events in time order, one every step from start, each for
// a customer picked uniformly.
func (r *meterRig) events(seed uint64, n int, start time.Time, step time.Duration) []usage.Event {
	rnd := rand.New(rand.NewPCG(seed, 7))
	out := make([]usage.Event, n)
	for i := range out {
		out[i] = r.event(rnd, r.accounts[rnd.IntN(len(r.accounts))], start.Add(time.Duration(i)*step))
	}
	return out
}

// publish publishes events with meter.Publisher from the given number of
// goroutines (as concurrent gateway requests do), and returns the rate.
func (r *meterRig) publish(tb testing.TB, events []usage.Event, goroutines int) float64 {
	tb.Helper()
	pub := meter.NewPublisher(r.js, r.stream, 30*time.Second)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	t0 := time.Now()
	for range goroutines {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(events)) {
					return
				}
				if err := pub.Publish(context.Background(), &events[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
	return float64(len(events)) / time.Since(t0).Seconds()
}

// countingStore is the ledger as the workers see it, counting the new
// events committed and noting when the count reaches a target.
type countingStore struct {
	s       meter.Store
	target  int64
	written atomic.Int64
	batches atomic.Int64
	once    sync.Once
	done    chan struct{}
	at      time.Time // when written reached target
	mu      sync.Mutex
	took    []time.Duration // each successful WriteEvents call's time
}

func newCountingStore(s meter.Store, target int) *countingStore {
	return &countingStore{s: s, target: int64(target), done: make(chan struct{})}
}

func (c *countingStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	t0 := time.Now()
	n, err := c.s.WriteEvents(ctx, events)
	if err == nil {
		took := time.Since(t0)
		c.mu.Lock()
		c.took = append(c.took, took)
		c.mu.Unlock()
		c.batches.Add(1)
		if c.written.Add(int64(n)) >= c.target {
			c.once.Do(func() { c.at = time.Now(); close(c.done) })
		}
	}
	return n, err
}

// runWorkers starts n meter workers (the durable consumer shared, as
// separate tollgate meter processes share it) and returns a function that
// stops them and waits for them.
func (r *meterRig) runWorkers(tb testing.TB, n int, store meter.Store, wc meter.WorkerConfig) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wc.Stream = r.stream
	for range n {
		w, err := meter.NewWorker(ctx, r.js, store, wc)
		if err != nil {
			cancel()
			tb.Fatal(err)
		}
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				tb.Error(err)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// defaultWorkerConfig is the worker configuration tollgate runs with when
// the config file says nothing (meter.Config's defaults).
func defaultWorkerConfig(tb testing.TB) meter.WorkerConfig {
	var c meter.Config
	if err := c.Validate(); err != nil {
		tb.Fatal(err)
	}
	return c.Worker()
}

// cpuTicks returns the user+system CPU time of process pid, in clock ticks
// (USER_HZ, 100 a second on Linux), from /proc/PID/stat.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// backendTicks sums cpuTicks over the Postgres backends serving the
// rig's database, by pid.
func (r *meterRig) backendTicks(tb testing.TB) map[int]int64 {
	tb.Helper()
	pids, err := r.store.QueryInt64sForTest(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range pids {
		out[int(p)] = cpuTicks(int(p))
	}
	return out
}

// machineTicks returns the busy and total CPU ticks of the whole machine
// (all CPUs, any process), from /proc/stat.
func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i >= 8 { // guest time is already counted in user time
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// cpuMeter measures the CPU seconds this process, the NATS server process
// and the database's Postgres backends spend between start and stop.
type cpuMeter struct {
	r              *meterRig
	self, nats     int64
	pg             map[int]int64
	Self, NATS, PG float64 // seconds
	wall           time.Time
	Wall           float64
	busy, total    int64
	// MachineBusy is the share of all the machine's CPU time that was busy;
	// Others is the share busy with processes other than the three above.
	MachineBusy, Others float64
}

func (r *meterRig) startCPU(tb testing.TB) *cpuMeter {
	c := &cpuMeter{r: r, self: cpuTicks(os.Getpid()), pg: r.backendTicks(tb), wall: time.Now()}
	c.busy, c.total = machineTicks()
	if r.natsPID != 0 {
		c.nats = cpuTicks(r.natsPID)
	}
	return c
}

func (c *cpuMeter) stop(tb testing.TB) {
	c.Wall = time.Since(c.wall).Seconds()
	c.Self = float64(cpuTicks(os.Getpid())-c.self) / 100
	if c.r.natsPID != 0 {
		c.NATS = float64(cpuTicks(c.r.natsPID)-c.nats) / 100
	}
	var pg int64
	for pid, t := range c.r.backendTicks(tb) {
		pg += t - c.pg[pid] // a backend started meanwhile counts whole
	}
	c.PG = float64(pg) / 100
	busy, total := machineTicks()
	if total > c.total {
		c.MachineBusy = float64(busy-c.busy) / float64(total-c.total)
		// /proc/stat counts in USER_HZ too: seconds × 100 ticks.
		c.Others = max(float64(busy-c.busy)-(c.Self+c.NATS+c.PG)*100, 0) / float64(total-c.total)
	}
}

// TestStagedWriteMatchesArray holds WriteEvents (staged by COPY) and the
// array statement BenchmarkMeterWrite measures it against to the same
// ledger: the same
// batch, with a duplicate and an attempt not charged, written each way into
// its own database, leaves the same events, attempts, rollups, balances and
// duplicate count.
func TestStagedWriteMatchesArray(t *testing.T) {
	ctx := context.Background()
	sums := func(write func(context.Context, []usage.Event) (int, error), r *meterRig) []int64 {
		t.Helper()
		events := r.events(3, 400, time.Now().Add(-time.Hour), time.Second)
		events[7] = events[6] // a duplicate within the batch
		events[9].NotCharged, events[9].Attempt, events[9].Deployment = true, 1, "east"
		events[9].RequestID = events[10].ID
		n, err := write(ctx, events)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.store.QueryInt64sForTest(ctx, `SELECT v FROM (VALUES
		  (1, (SELECT count(*) FROM usage_events)),
		  (2, (SELECT coalesce(sum(prompt_tokens + completion_tokens + cost_e12), 0)::bigint FROM usage_events)),
		  (3, (SELECT count(*) FROM usage_attempts)),
		  (4, (SELECT count(*) FROM usage_attempts WHERE request_id IS NOT NULL AND deployment = 'east')),
		  (5, (SELECT count(*) FROM event_ids)),
		  (6, (SELECT coalesce(sum(requests), 0)::bigint FROM usage_hourly)),
		  (7, (SELECT coalesce(sum(cost_e12), 0)::bigint FROM usage_hourly)),
		  (8, (SELECT coalesce(sum(charges_e12), 0)::bigint FROM customer_balances)),
		  (9, (SELECT coalesce(sum(value), 0)::bigint FROM ingest_counters WHERE name = 'duplicates'))
		) AS t(i, v) ORDER BY i`)
		if err != nil {
			t.Fatal(err)
		}
		return append([]int64{int64(n)}, got...)
	}
	ra := newMeterRig(t, 50, 3, false)
	array := sums(ra.store.WriteEventsArraysForTest, ra)
	rs := newMeterRig(t, 50, 3, false)
	staged := sums(rs.store.WriteEvents, rs)
	if !slices.Equal(array, staged) {
		t.Fatalf("written, events, their tokens and cost, attempts, attempts named, event ids, rollup requests, rollup cost, charges, duplicates:\narray  %v\nstaged %v", array, staged)
	}
	if array[3] != 1 || array[4] != 1 || array[9] != 1 {
		t.Fatalf("the batch's attempt and duplicate were not written as meant: %v", array)
	}
}
