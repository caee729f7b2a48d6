// Command shardbench measures how the meter's ingest scales when usage is
// sharded across ledger databases (docs/scaling.md, issue 16): it starts
// its own Postgres instances (initdb into temporary directories, each on
// its own port, run as the postgres OS user when run as root) and its own
// JetStream server (the one Tollgate embeds, in a child process), then,
// for each shard count and run, makes a fresh migrated ledger per shard
// with BenchmarkMeter's customers and prices, publishes the events with
// meter.Publisher to each customer's shard subject
// (tollgate.usage.v1.<shard>, one stream per shard), and times meter
// workers (meter.Worker, tollgate's defaults, -workers per shard on the
// shard's durable consumer) draining them into their shard's Postgres
// through ledger.Store.WriteEvents, rollups included. Each run checks
// every shard's ledger: each event once, rollups equal, a clean
// reconciliation, no dead letter.
//
// It prints per run the aggregate events/s, the CPU seconds per million
// events of each Postgres instance (all its processes, and its database's
// backends alone), of this process (the workers) and of the NATS server,
// the WAL bytes per event, the load average and the CPU other processes
// took; then a summary per shard count and an extrapolation to -target
// events/s. The Postgres instances and NATS are stopped and their
// directories deleted at the end, also on Ctrl-C.
//
//	go run ./cmd/shardbench [-events 200000] [-shards 1,2] [-runs 3] [-workers 2]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "natsd" {
		os.Exit(natsdMain(os.Args[2:]))
	}
	b, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = b.Run(ctx, os.Stdout)
	stop()
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardbench:", err)
		os.Exit(1)
	}
}

// bench is the benchmark's settings and the servers it started.
type bench struct {
	events, runs, workers, customers, models, batch int
	warmup                                          int
	shardCounts                                     []int
	pgBin                                           string
	maxLoad, pgCores                                float64
	loadWait                                        time.Duration
	plan                                            plan

	root string // NATS storage
	pgs  []*pgInstance
	nats *natsProc
}

// parseFlags reads the command line; errors (also written to out) name the flag.
func parseFlags(args []string, out io.Writer) (*bench, error) {
	b := &bench{}
	fs := flag.NewFlagSet("shardbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&b.events, "events", 200_000, "events per run, across all shards")
	shards := fs.String("shards", "1,2", "shard counts to measure, each once per run, interleaved")
	fs.IntVar(&b.runs, "runs", 3, "runs of each shard count")
	fs.IntVar(&b.warmup, "warmup", 50_000, "events of one unreported run over the most shards first, to warm the new servers (0: none)")
	fs.IntVar(&b.workers, "workers", 2, "meter workers per shard")
	fs.IntVar(&b.customers, "customers", 1000, "customers, placed on shards by jump hash of their name")
	fs.IntVar(&b.models, "models", 20, "priced models")
	fs.IntVar(&b.batch, "batch", 0, "meter batch size (0: tollgate's default)")
	fs.StringVar(&b.pgBin, "pgbin", "/usr/lib/postgresql/15/bin", "directory of the Postgres server binaries (initdb, postgres)")
	fs.Float64Var(&b.pgCores, "pg-cores", 0, "cap each Postgres instance at this many CPUs with a cgroup, as if each shard had a machine of that size (0: no cap; needs root)")
	fs.Float64Var(&b.maxLoad, "max-load", 0, "before each run, wait (up to -load-wait) for the 1-minute load average to fall to this (0: do not wait)")
	fs.DurationVar(&b.loadWait, "load-wait", 2*time.Minute, "longest wait for -max-load before a run")
	fs.Float64Var(&b.plan.target, "target", 1e6, "extrapolate to this many events/s")
	fs.Float64Var(&b.plan.shardCores, "shard-cores", 16, "extrapolation: cores of each Postgres shard's machine")
	fs.Float64Var(&b.plan.utilization, "utilization", 0.5, "extrapolation: share of each core budgeted for ingest")
	fs.Float64Var(&b.plan.natsReplicas, "nats-replicas", 3, "extrapolation: JetStream replicas of each usage stream")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fail := func(format string, a ...any) (*bench, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintln(out, "shardbench:", err)
		return nil, err
	}
	for _, f := range strings.Split(*shards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 8 {
			return fail("-shards: %q is not a shard count between 1 and 8", f)
		}
		b.shardCounts = append(b.shardCounts, n)
	}
	switch {
	case b.events < 1000:
		return fail("-events must be at least 1000, not %d", b.events)
	case b.warmup != 0 && b.warmup < 1000:
		return fail("-warmup must be 0 or at least 1000, not %d", b.warmup)
	case b.runs < 1:
		return fail("-runs must be at least 1, not %d", b.runs)
	case b.workers < 1 || b.workers > 32:
		return fail("-workers must be between 1 and 32, not %d", b.workers)
	case b.customers < 10:
		return fail("-customers must be at least 10, not %d", b.customers)
	case b.models < 1:
		return fail("-models must be at least 1, not %d", b.models)
	case b.batch < 0 || b.batch > 10000:
		return fail("-batch must be between 0 and 10000, not %d", b.batch)
	case b.pgCores < 0:
		return fail("-pg-cores must not be negative, not %g", b.pgCores)
	}
	if _, err := extrapolate(summary{pgInstance: 1}, b.plan); err != nil {
		return fail("extrapolation flags: %w", err)
	}
	return b, nil
}

// Run starts the servers and runs the measurements, writing results to w.
// Close stops the servers whatever Run returned.
func (b *bench) Run(ctx context.Context, w io.Writer) error {
	most := 0
	for _, n := range b.shardCounts {
		most = max(most, n)
	}
	var err error
	if b.root, err = os.MkdirTemp("", "tollgate-shardbench-"); err != nil {
		return err
	}
	if b.nats, err = startNATS(filepath.Join(b.root, "jetstream")); err != nil {
		return err
	}
	for k := range most {
		p, err := newPG(ctx, fmt.Sprintf("pg%d", k), b.pgBin)
		if err != nil {
			return err
		}
		b.pgs = append(b.pgs, p)
		if err := p.start(ctx); err != nil {
			return err
		}
		if b.pgCores > 0 {
			if err := p.limit(b.pgCores); err != nil {
				return fmt.Errorf("%s: -pg-cores: %w", p.name, err)
			}
		}
		logf("postgres %s on 127.0.0.1:%d (pid %d, %s)", p.name, p.port, p.pid(), p.dir)
	}
	logf("nats on %s (pid %d); %d CPUs; each run: %d events, %d workers per shard", b.nats.url, b.nats.pid(),
		numCPU(), b.events, b.workers)
	capped := "uncapped"
	if b.pgCores > 0 {
		capped = fmt.Sprintf("capped at %g CPUs each (cgroup)", b.pgCores)
	}
	fmt.Fprintf(w, "shardbench: %d events per run, %d customers, %d models, %d meter workers per shard; Postgres instances %s; %d CPUs shared by every process; started %s\n",
		b.events, b.customers, b.models, b.workers, capped, numCPU(), time.Now().UTC().Format(time.DateTime))
	var results []runResult
	n := 0
	if b.warmup > 0 {
		logf("warm-up run: %d shard(s), %d events", most, b.warmup)
		measured := b.events
		b.events = b.warmup
		_, err := b.run(ctx, n, most)
		b.events = measured
		if err != nil {
			return fmt.Errorf("warm-up run: %w", err)
		}
		n++
	}
	for range b.runs {
		for _, shards := range b.shardCounts {
			if err := b.waitLoad(ctx); err != nil {
				return err
			}
			logf("run %d: %d shard(s)", n, shards)
			r, err := b.run(ctx, n, shards)
			if err != nil {
				return fmt.Errorf("run %d (%d shards): %w", n, shards, err)
			}
			printRun(w, n, r)
			results = append(results, r)
			n++
		}
	}
	sums := summarize(results)
	printSummary(w, sums)
	costs := highest(sums)
	e, err := extrapolate(costs, b.plan)
	if err != nil {
		return err
	}
	printEstimate(w, costs, b.plan, e)
	return nil
}

// waitLoad waits, when -max-load is set, for the load average to fall to
// it, or -load-wait at most (then the run goes ahead, its load recorded).
func (b *bench) waitLoad(ctx context.Context) error {
	if b.maxLoad <= 0 {
		return nil
	}
	deadline := time.Now().Add(b.loadWait)
	for l := loadavg1(); l > b.maxLoad && time.Now().Before(deadline); l = loadavg1() {
		logf("load average %.2f above %.2f; waiting", l, b.maxLoad)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	return nil
}

// Close stops NATS and the Postgres instances and deletes their
// directories. It is safe after a failed or interrupted Run.
func (b *bench) Close() error {
	var errs []error
	for _, p := range b.pgs {
		if err := p.destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.nats != nil {
		b.nats.stop()
	}
	if b.root != "" {
		if err := os.RemoveAll(b.root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var began = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
}

// numCPU is the CPUs this process may run on.
func numCPU() int { return runtime.NumCPU() }
