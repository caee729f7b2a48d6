package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
)

// shardResult is one shard's part of a run.
type shardResult struct {
	events  int
	elapsed time.Duration // from the workers' start to the shard's last commit
	batches int64
	// pgBackends is the CPU seconds of the Postgres backends serving the
	// shard's database; pgInstance of every process of its instance
	// (backends, WAL writer, checkpointer, autovacuum...).
	pgBackends, pgInstance float64
	walBytes               int64
	dbBytes                int64 // growth of the database on disk (pg_database_size)
	// waits is what the database's backends were doing, sampled during
	// the run (see sampleWaits).
	waits waitSample
	// throttled is the share of the run's CFS periods in which the
	// instance used up its -pg-cores quota (-1: not capped).
	throttled float64
}

// runResult is one measured run.
type runResult struct {
	shards, events int
	elapsed        time.Duration // from the workers' start to the last shard's last commit
	perShard       []shardResult
	// bench is this process's CPU seconds (the meter workers and their
	// NATS clients: nothing else runs in it meanwhile); nats the NATS
	// server's.
	bench, nats float64
	// machineBusy is the share of all CPUs' time that was busy; others the
	// share busy with processes other than the ones measured here.
	machineBusy, others float64
	loadStart, loadEnd  float64
	publishRate         float64
	// natsPublish is the NATS server's CPU seconds while the events were
	// published (before the timed drain): the stream's write side.
	natsPublish float64
}

func (r runResult) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }

// shardRun is one shard's ledger and JetStream connection in a run.
type shardRun struct {
	k        int
	pg       *pgInstance
	db       string
	store    *ledger.Store
	admin    *pgx.Conn // to the shard's database: statistics and checks
	nc       *nats.Conn
	js       jetstream.JetStream
	accounts []account
	expect   int   // events routed here
	prompt   int64 // their prompt tokens
	cs       *countingStore
}

// run is one measured run over the first `shards` Postgres instances.
func (b *bench) run(ctx context.Context, n, shards int) (res runResult, err error) {
	dir, err := newDirectory(shards)
	if err != nil {
		return res, err
	}
	srs := make([]*shardRun, shards)
	defer func() {
		if cerr := b.teardown(srs); err == nil {
			err = cerr
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	for k := range shards {
		srs[k] = &shardRun{k: k, pg: b.pgs[k], db: fmt.Sprintf("shardbench_%d_%d", n, k)}
		sr := srs[k]
		g.Go(func() error { return b.setupShard(gctx, sr, dir) })
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	var accounts []account
	for _, sr := range srs {
		accounts = append(accounts, sr.accounts...)
		for _, a := range sr.accounts {
			dir.record(a.customer, sr.k)
		}
	}
	events := makeEvents(uint64(n), accounts, b.models, b.events, time.Now(), 20*time.Microsecond)
	for i := range events {
		k, _ := dir.shard(events[i].CustomerID)
		srs[k].expect++
		srs[k].prompt += events[i].Usage.PromptTokens
	}
	pnc, err := nats.Connect(b.nats.url, nats.Name("shardbench-publisher"))
	if err != nil {
		return res, err
	}
	pjs, err := jetstream.New(pnc)
	if err == nil {
		nats0 := processTicks(b.nats.pid())
		res.publishRate, err = publish(ctx, pjs, dir, events, 64)
		res.natsPublish = float64(processTicks(b.nats.pid())-nats0) / ticksPerSecond
	}
	pnc.Close()
	if err != nil {
		return res, fmt.Errorf("publish: %w", err)
	}
	events = nil

	res.shards, res.events = shards, b.events
	res.loadStart = loadavg1()
	before, err := b.snapshot(ctx, srs)
	if err != nil {
		return res, err
	}
	wctx, stopWorkers := context.WithCancel(context.Background())
	sctx, stopSampling := context.WithCancel(ctx)
	samples := make([]chan waitSample, len(srs))
	for i, sr := range srs {
		samples[i] = make(chan waitSample, 1)
		go func() { samples[i] <- sampleWaits(sctx, sr.pg.url(sr.db), 100*time.Millisecond) }()
	}
	var wg sync.WaitGroup
	var werrs []error
	var mu sync.Mutex
	t0 := time.Now()
	wc := b.workerConfig()
	for _, sr := range srs {
		sr.cs = newCountingStore(sr.store, sr.expect)
		c := wc
		c.Stream, c.Durable = shardStreamConfig(sr.k), shardDurable(sr.k)
		for range b.workers {
			w, err := meter.NewWorker(ctx, sr.js, sr.cs, c)
			if err != nil {
				stopWorkers()
				wg.Wait()
				stopSampling()
				for _, c := range samples {
					<-c
				}
				return res, fmt.Errorf("shard %d: %w", sr.k, err)
			}
			wg.Go(func() {
				if err := w.Run(wctx); err != nil {
					mu.Lock()
					werrs = append(werrs, err)
					mu.Unlock()
				}
			})
		}
	}
	waitErr := func() error {
		timeout := time.After(30 * time.Minute)
		for _, sr := range srs {
			select {
			case <-sr.cs.done:
			case <-ctx.Done():
				return ctx.Err()
			case <-timeout:
				return fmt.Errorf("shard %d: %d of %d events written after 30 minutes", sr.k, sr.cs.written.Load(), sr.expect)
			}
		}
		return nil
	}()
	var last time.Time
	for _, sr := range srs {
		if sr.cs.at.After(last) {
			last = sr.cs.at
		}
	}
	stopSampling()
	waits := make([]waitSample, len(srs))
	for i := range srs {
		waits[i] = <-samples[i]
	}
	after, serr := b.snapshot(ctx, srs)
	res.loadEnd = loadavg1()
	stopWorkers()
	wg.Wait()
	if err := errors.Join(waitErr, serr, errors.Join(werrs...)); err != nil {
		return res, err
	}
	res.elapsed = last.Sub(t0)
	b.account(&res, srs, before, after, t0)
	for i := range res.perShard {
		res.perShard[i].waits = waits[i]
	}
	return res, b.verify(ctx, srs)
}

// workerConfig is tollgate's default worker configuration (meter.Config's
// defaults), the batch size overridden by -batch.
func (b *bench) workerConfig() meter.WorkerConfig {
	var c meter.Config
	if b.batch > 0 {
		c.BatchSize = b.batch
		c.MaxAckPending = max(meter.DefaultMaxAckPending, 4*b.batch)
	}
	_ = c.Validate() // -batch is checked in parseFlags
	return c.Worker()
}

// setupShard makes shard sr's fresh migrated ledger with its customers,
// its admin connection, its NATS connection and its usage stream.
func (b *bench) setupShard(ctx context.Context, sr *shardRun, dir *directory) error {
	var err error
	if sr.store, err = ledger.Open(ctx, sr.pg.url(sr.db)); err != nil {
		return fmt.Errorf("shard %d: %w", sr.k, err)
	}
	if _, err := sr.store.Migrate(ctx); err != nil {
		return fmt.Errorf("shard %d: %w", sr.k, err)
	}
	if err := seedPrices(ctx, sr.store, b.models); err != nil {
		return fmt.Errorf("shard %d: %w", sr.k, err)
	}
	if sr.accounts, err = seedCustomers(ctx, sr.store, dir, sr.k, b.models, b.customers); err != nil {
		return fmt.Errorf("shard %d: %w", sr.k, err)
	}
	if len(sr.accounts) == 0 {
		return fmt.Errorf("shard %d: no customer placed there (more -customers)", sr.k)
	}
	if sr.admin, err = pgx.Connect(ctx, sr.pg.url(sr.db)); err != nil {
		return fmt.Errorf("shard %d: %w", sr.k, err)
	}
	// Current statistics, as a running ledger has.
	if _, err := sr.admin.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("shard %d: analyze: %w", sr.k, err)
	}
	// One connection per worker set, as a `tollgate meter` process per
	// shard would have.
	if sr.nc, err = nats.Connect(b.nats.url, nats.Name(fmt.Sprintf("shardbench-meter-%d", sr.k))); err != nil {
		return err
	}
	if sr.js, err = jetstream.New(sr.nc); err != nil {
		return err
	}
	_, err = meter.EnsureStream(ctx, sr.js, shardStreamConfig(sr.k))
	return err
}

// teardown deletes the run's streams and drops its databases.
func (b *bench) teardown(srs []*shardRun) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var errs []error
	for _, sr := range srs {
		if sr == nil {
			continue
		}
		if sr.js != nil {
			if err := sr.js.DeleteStream(ctx, shardStream(sr.k)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				errs = append(errs, err)
			}
			if sr.k == 0 {
				if err := sr.js.DeleteStream(ctx, meter.DLQStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
					errs = append(errs, err)
				}
			}
			sr.nc.Close()
		}
		if sr.admin != nil {
			_ = sr.admin.Close(ctx)
		}
		if sr.store != nil {
			sr.store.Close()
		}
		if err := sr.pg.exec(ctx, "DROP DATABASE IF EXISTS "+sr.db+" WITH (FORCE)"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// snapshot is the CPU and WAL counters at one moment.
type snapshot struct {
	self, nats  int64
	busy, total int64
	pgTree      []int64
	pgBackends  []map[int]int64
	wal         []int64    // bytes: pg_current_wal_lsn
	size        []int64    // bytes: pg_database_size
	periods     [][2]int64 // CFS periods and throttled periods per capped instance
}

func (b *bench) snapshot(ctx context.Context, srs []*shardRun) (snapshot, error) {
	s := snapshot{self: processTicks(os.Getpid()), nats: processTicks(b.nats.pid())}
	for _, sr := range srs {
		s.pgTree = append(s.pgTree, treeTicks(sr.pg.pid()))
		rows, err := sr.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
		if err != nil {
			return s, err
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return s, err
		}
		m := map[int]int64{}
		for _, p := range pids {
			m[int(p)] = processTicks(int(p))
		}
		s.pgBackends = append(s.pgBackends, m)
		var lsn string
		var size int64
		if err := sr.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, pg_database_size(current_database())`).Scan(&lsn, &size); err != nil {
			return s, err
		}
		s.size = append(s.size, size)
		at, err := parseLSN(lsn)
		if err != nil {
			return s, err
		}
		s.wal = append(s.wal, at)
		var pt [2]int64
		if sr.pg.cap != nil {
			pt[0], pt[1] = sr.pg.cap.throttle()
		}
		s.periods = append(s.periods, pt)
	}
	s.busy, s.total = machineTicks()
	return s, nil
}

// account fills res's CPU and WAL figures from two snapshots.
func (b *bench) account(res *runResult, srs []*shardRun, before, after snapshot, t0 time.Time) {
	sec := func(t int64) float64 { return float64(t) / ticksPerSecond }
	res.bench = sec(after.self - before.self)
	res.nats = sec(after.nats - before.nats)
	measured := res.bench + res.nats
	for i, sr := range srs {
		var backends int64
		for pid, t := range after.pgBackends[i] {
			backends += t - before.pgBackends[i][pid] // a backend started meanwhile counts whole
		}
		s := shardResult{events: sr.expect, elapsed: sr.cs.at.Sub(t0), batches: sr.cs.batches.Load(),
			pgBackends: sec(backends), pgInstance: sec(after.pgTree[i] - before.pgTree[i]),
			walBytes: after.wal[i] - before.wal[i], dbBytes: after.size[i] - before.size[i], throttled: -1}
		if p := after.periods[i][0] - before.periods[i][0]; sr.pg.cap != nil && p > 0 {
			s.throttled = float64(after.periods[i][1]-before.periods[i][1]) / float64(p)
		}
		measured += s.pgInstance
		res.perShard = append(res.perShard, s)
	}
	if total := after.total - before.total; total > 0 {
		busy := after.busy - before.busy
		res.machineBusy = float64(busy) / float64(total)
		res.others = max(float64(busy)-measured*ticksPerSecond, 0) / float64(total)
	}
}

// verify checks every shard's ledger: each event routed there stored
// exactly once, the hourly rollups summing to them, a clean
// reconciliation of the month, and nothing in the dead-letter stream.
func (b *bench) verify(ctx context.Context, srs []*shardRun) error {
	for _, sr := range srs {
		var rows, ids, requests, prompt int64
		err := sr.admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT id) FROM usage_events`).Scan(&rows, &ids)
		if err == nil {
			err = sr.admin.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, coalesce(sum(prompt_tokens), 0)::bigint
				FROM usage_hourly`).Scan(&requests, &prompt)
		}
		if err != nil {
			return fmt.Errorf("shard %d: %w", sr.k, err)
		}
		want := int64(sr.expect)
		if rows != want || ids != want || requests != want || prompt != sr.prompt {
			return fmt.Errorf("shard %d: %d events (%d ids), rollups %d requests and %d prompt tokens; want %d events and %d prompt tokens",
				sr.k, rows, ids, requests, prompt, want, sr.prompt)
		}
		now := time.Now().UTC()
		month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		rec, err := sr.store.Reconcile(ctx, month.AddDate(0, -1, 0), month.AddDate(0, 2, 0))
		if err != nil {
			return fmt.Errorf("shard %d: reconcile: %w", sr.k, err)
		}
		if !rec.Clean || rec.Events != want {
			return fmt.Errorf("shard %d: reconciliation not clean: %+v", sr.k, rec)
		}
	}
	dlq, err := srs[0].js.Stream(ctx, meter.DLQStream)
	if err != nil {
		return fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := dlq.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs != 0 {
		return fmt.Errorf("%d events set aside in the dead-letter stream", info.State.Msgs)
	}
	return nil
}

// waitSample is the mean number of the database's backends (other than
// the sampler's) that were active, and of those, on CPU (no wait event)
// and waiting for a lock (a row or a transaction: another writer's), over
// a run's samples.
type waitSample struct {
	samples                int
	active, onCPU, waiting float64
}

// sampleWaits samples pg_stat_activity of the database at url every
// interval until ctx ends, on a connection of its own (its backend, a
// short query every interval, counts in the instance's CPU).
func sampleWaits(ctx context.Context, url string, every time.Duration) waitSample {
	var w waitSample
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return w
	}
	defer conn.Close(context.Background())
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if w.samples > 0 {
				n := float64(w.samples)
				w.active, w.onCPU, w.waiting = w.active/n, w.onCPU/n, w.waiting/n
			}
			return w
		case <-t.C:
		}
		var active, onCPU, waiting int
		err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'active'),
				count(*) FILTER (WHERE state = 'active' AND wait_event IS NULL),
				count(*) FILTER (WHERE state = 'active' AND wait_event_type = 'Lock')
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&active, &onCPU, &waiting)
		if err != nil {
			continue // ctx ended mid-query: the loop ends at the select
		}
		w.samples++
		w.active += float64(active)
		w.onCPU += float64(onCPU)
		w.waiting += float64(waiting)
	}
}

// parseLSN reads a Postgres WAL location ("16/B374D848": the high and low
// 32 bits in hexadecimal) as a byte position.
func parseLSN(s string) (int64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("wal lsn %q: no '/'", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("wal lsn %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("wal lsn %q: %w", s, err)
	}
	return int64(h<<32 | l), nil
}
