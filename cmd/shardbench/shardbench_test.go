package main

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the benchmark's NATS process,
// as the command does (startNATS re-executes its own binary).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "natsd" {
		os.Exit(natsdMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestJumpHashMovesOnlyToTheNewShard(t *testing.T) {
	const keys = 100_000
	for n := 1; n < 12; n++ {
		counts := make([]int, n+1)
		for k := range uint64(keys) {
			key := k*0x9E3779B97F4A7C15 + 12345
			a, b := jumpHash(key, n), jumpHash(key, n+1)
			if a < 0 || a >= n || b < 0 || b > n {
				t.Fatalf("jumpHash(%d): %d of %d, %d of %d buckets", key, a, n, b, n+1)
			}
			if a != b && b != n {
				t.Fatalf("key %d moved from %d to %d going from %d to %d buckets", key, a, b, n, n+1)
			}
			counts[b]++
		}
		// Uniform: each bucket within 5% of its share.
		want := float64(keys) / float64(n+1)
		for i, c := range counts {
			if math.Abs(float64(c)-want) > 0.05*want {
				t.Errorf("%d buckets: bucket %d has %d keys, want about %.0f", n+1, i, c, want)
			}
		}
	}
	if got := jumpHash(42, 1); got != 0 {
		t.Errorf("one bucket: %d", got)
	}
}

func TestDirectory(t *testing.T) {
	for _, n := range []int{0, -1, 1025} {
		if _, err := newDirectory(n); err == nil || !strings.Contains(err.Error(), "shards") {
			t.Errorf("newDirectory(%d): %v", n, err)
		}
	}
	d, err := newDirectory(2)
	if err != nil {
		t.Fatal(err)
	}
	seen := [2]int{}
	for i := range 1000 {
		name := "customer-" + string(rune('a'+i%26)) + strings.Repeat("x", i%7) + string(rune('0'+i%10)) + string(rune(i))
		k := d.place(name)
		if k != d.place(name) {
			t.Fatalf("place(%q) not stable", name)
		}
		seen[k]++
	}
	if seen[0] < 400 || seen[1] < 400 {
		t.Errorf("placement of 1000 names on 2 shards: %v", seen)
	}
	if _, ok := d.shard("c1"); ok {
		t.Error("unknown customer routed")
	}
	d.record("c1", 1)
	if k, ok := d.shard("c1"); !ok || k != 1 {
		t.Errorf("shard(c1) = %d, %v", k, ok)
	}
	if shardSubject(1) != "tollgate.usage.v1.1" || shardStream(0) != "TOLLGATE_USAGE_0" || shardDurable(3) != "tollgate-meter-3" {
		t.Error("shard names changed: docs/scaling.md names them")
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses, as postgres sets them.
	s := "4242 (postgres: 15/main: a (b) c) S 17 4242 4242 0 -1 4194560 532 0 0 0 150 25 7 3 20 0 1 0 3021 0 0\n"
	st, err := parseProcStat(s)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 17 || st.self != 175 || st.children != 10 {
		t.Errorf("got %+v, want ppid 17, self 175, children 10", st)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 10 u 12 13 14"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q): no error", bad)
		}
	}
}

func TestParseMachineStat(t *testing.T) {
	busy, total, err := parseMachineStat("cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 1 2 3\n")
	if err != nil {
		t.Fatal(err)
	}
	// user nice system idle iowait irq softirq steal (guest already in user).
	if busy != 100+5+50+3+2+0 || total != 100+5+50+800+20+3+2+0 {
		t.Errorf("busy %d total %d", busy, total)
	}
	if _, _, err := parseMachineStat("intr 1 2 3 4 5\n"); err == nil {
		t.Error("no error without the cpu line")
	}
}

func TestParseLoadavgAndLSN(t *testing.T) {
	if l, err := parseLoadavg("2.49 6.11 6.92 3/812 16949\n"); err != nil || l != 2.49 {
		t.Errorf("loadavg: %v %v", l, err)
	}
	if _, err := parseLoadavg("2.49"); err == nil {
		t.Error("short loadavg: no error")
	}
	if b, err := parseLSN("16/B374D848"); err != nil || b != 0x16<<32|0xB374D848 {
		t.Errorf("lsn: %x %v", b, err)
	}
	for _, bad := range []string{"", "16B374D848", "x/1", "1/100000000"} {
		if _, err := parseLSN(bad); err == nil {
			t.Errorf("parseLSN(%q): no error", bad)
		}
	}
}

func TestSummarizeAndExtrapolate(t *testing.T) {
	run := func(shards int, secs float64, pg ...float64) runResult {
		r := runResult{shards: shards, events: 1_000_000, elapsed: time.Duration(secs * float64(time.Second)),
			bench: 10, nats: 5, natsPublish: 7, loadStart: 1}
		for _, p := range pg {
			r.perShard = append(r.perShard, shardResult{events: 1_000_000 / len(pg), pgInstance: p / float64(len(pg)),
				pgBackends: p / float64(len(pg)), walBytes: 1000 * 1_000_000 / int64(len(pg)), dbBytes: 500 * 1_000_000 / int64(len(pg))})
		}
		return r
	}
	sums := summarize([]runResult{run(1, 50, 30), run(2, 40, 30, 30), run(1, 40, 20), run(2, 20, 30, 30), run(1, 100, 40)})
	if len(sums) != 2 || sums[0].shards != 1 || sums[1].shards != 2 {
		t.Fatalf("summaries: %+v", sums)
	}
	if got := sums[0].median(); got != 20_000 {
		t.Errorf("1 shard median = %v, want 20000", got)
	}
	if got := sums[1].median(); got != 37_500 {
		t.Errorf("2 shards median = %v, want 37500 (mean of 25000 and 50000)", got)
	}
	if sums[1].all != 45 {
		t.Errorf("all processes: %v cpu_s/1M, want 10+5+30", sums[1].all)
	}
	if p, th := parseCPUStat("nr_periods 250\nnr_throttled 40\nthrottled_time 123\n"); p != 250 || th != 40 {
		t.Errorf("cpu.stat: %d %d", p, th)
	}
	if sums[0].pgInstance != 30 || sums[1].pgInstance != 30 || sums[1].walPerEvent != 1000 || sums[1].bench != 10 {
		t.Errorf("costs: %+v", sums[1])
	}
	h := highest(sums)
	if h.pgInstance != 30 || h.walPerEvent != 1000 || h.shards != 2 {
		t.Errorf("highest: %+v", h)
	}
	sums[0].pgInstance = 31
	if h := highest(sums); h.pgInstance != 31 {
		t.Errorf("highest pg instance = %v, want 31", h.pgInstance)
	}
	sums[0].pgInstance = 30
	p := plan{target: 1e6, shardCores: 16, utilization: 0.5, natsReplicas: 3}
	e, err := extrapolate(sums[1], p)
	if err != nil {
		t.Fatal(err)
	}
	// 30 s/1M: 33,333 events/s per core; 8 usable cores: 266,667 per shard.
	if e.shards != 4 || math.Abs(e.perShard-266_667) > 1 || e.atShard != 250_000 || e.walMBps != 250 ||
		e.pgCores != 60 || e.workerCores != 20 || e.natsCores != 72 || e.diskTBPerDay != 43.2 {
		t.Errorf("estimate: %+v", e)
	}
	for _, bad := range []plan{{0, 16, .5, 3}, {1e6, 0, .5, 3}, {1e6, 16, 0, 3}, {1e6, 16, 1.5, 3}, {1e6, 16, .5, 0}} {
		if _, err := extrapolate(sums[1], bad); err == nil {
			t.Errorf("plan %+v: no error", bad)
		}
	}
}

func TestParseFlags(t *testing.T) {
	b, err := parseFlags([]string{"-shards", "1, 2,4", "-events", "5000"}, io.Discard)
	if err != nil || len(b.shardCounts) != 3 || b.shardCounts[2] != 4 || b.events != 5000 {
		t.Fatalf("%+v %v", b, err)
	}
	for _, args := range [][]string{{"-shards", "0"}, {"-shards", "1,x"}, {"-events", "10"}, {"-workers", "0"},
		{"-utilization", "2"}, {"-batch", "20000"}} {
		var out strings.Builder
		if _, err := parseFlags(args, &out); err == nil || !strings.Contains(out.String(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%v: err %v, output %q", args, err, out.String())
		}
	}
}

// TestShardedIngest runs the benchmark small: two Postgres instances of its
// own, one and two shards; each run checks that every shard's ledger holds
// exactly its customers' events, once, with rollups and a clean
// reconciliation. It needs the Postgres server binaries (-pgbin's default,
// or TOLLGATE_PGBIN); without them it skips, except under CI=true.
func TestShardedIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Postgres servers")
	}
	bin := "/usr/lib/postgresql/15/bin"
	if v := os.Getenv("TOLLGATE_PGBIN"); v != "" {
		bin = v
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("no Postgres server binaries: %v", err)
		}
		t.Skipf("no Postgres server binaries: %v", err)
	}
	b := &bench{events: 3000, runs: 1, warmup: 1000, workers: 2, customers: 40, models: 5, shardCounts: []int{1, 2}, pgBin: bin,
		plan: plan{target: 1e6, shardCores: 16, utilization: 0.5, natsReplicas: 3}}
	var out strings.Builder
	err := b.Run(context.Background(), &out)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"run 1 shards=1 events=3000", "run 2 shards=2 events=3000", "  shard 1: ",
		"aggregate ingest at 2 shards / at 1", "extrapolation to 1000000 events/s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, p := range b.pgs {
		if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p.dir, err)
		}
	}
}
