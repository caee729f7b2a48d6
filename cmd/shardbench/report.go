package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// perM converts CPU seconds spent on n events to seconds per million events.
func perM(seconds float64, n int) float64 { return seconds * 1e6 / float64(n) }

// allCPU is the CPU seconds of every measured process in a run's timed
// span: this process, NATS and every process of the Postgres instances.
func (r runResult) allCPU() float64 {
	t := r.bench + r.nats
	for _, s := range r.perShard {
		t += s.pgInstance
	}
	return t
}

// printRun writes one run's line per shard and its totals.
func printRun(w io.Writer, i int, r runResult) {
	fmt.Fprintf(w, "run %d shards=%d events=%d: %.0f events/s in %.2fs; load %.2f→%.2f; machine busy %.0f%%, others %.0f%%; "+
		"bench %.1f nats %.1f all %.1f cpu_s/1M (publish side: nats %.1f cpu_s/1M at %.0f events/s)\n",
		i, r.shards, r.events, r.rate(), r.elapsed.Seconds(), r.loadStart, r.loadEnd, 100*r.machineBusy, 100*r.others,
		perM(r.bench, r.events), perM(r.nats, r.events), perM(r.allCPU(), r.events), perM(r.natsPublish, r.events), r.publishRate)
	for k, s := range r.perShard {
		throttled := ""
		if s.throttled >= 0 {
			throttled = fmt.Sprintf("; throttled in %.0f%% of periods", 100*s.throttled)
		}
		fmt.Fprintf(w, "  shard %d: %d events in %.2fs (%.0f events/s), %.0f events/batch; pg backends %.1f, pg instance %.1f cpu_s/1M (%.2f CPUs); backends active %.2f, on CPU %.2f, waiting for a lock %.2f; wal %.0f B/event; database +%.0f B/event%s\n",
			k, s.events, s.elapsed.Seconds(), float64(s.events)/s.elapsed.Seconds(), float64(s.events)/float64(max(s.batches, 1)),
			perM(s.pgBackends, s.events), perM(s.pgInstance, s.events), s.pgInstance/r.elapsed.Seconds(),
			s.waits.active, s.waits.onCPU, s.waits.waiting,
			float64(s.walBytes)/float64(s.events), float64(s.dbBytes)/float64(s.events), throttled)
	}
}

// summary is the runs of one shard count put together.
type summary struct {
	shards int
	rates  []float64 // events/s, sorted
	// Per million events, means over the runs: a shard's Postgres
	// instance on the events routed to it; its backends alone; this
	// process (the meter workers); the NATS server draining, and
	// publishing.
	pgInstance, pgBackends, bench, nats, natsPublish float64
	all                                              float64 // every measured process, per million events in all
	walPerEvent, dbPerEvent                          float64 // bytes, means over shards and runs
	others, load                                     [2]float64
}

func (s summary) median() float64 { return median(s.rates) }

// median of sorted values (0 when none).
func median(sorted []float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return sorted[n/2]
	default:
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
}

// summarize groups runs by shard count, in the order the counts first appear.
func summarize(runs []runResult) []summary {
	var out []summary
	for _, r := range runs {
		i := slices.IndexFunc(out, func(s summary) bool { return s.shards == r.shards })
		if i < 0 {
			out = append(out, summary{shards: r.shards, others: [2]float64{math.Inf(1), 0}, load: [2]float64{math.Inf(1), 0}})
			i = len(out) - 1
		}
		s := &out[i]
		s.rates = append(s.rates, r.rate())
		s.bench += perM(r.bench, r.events)
		s.nats += perM(r.nats, r.events)
		s.natsPublish += perM(r.natsPublish, r.events)
		s.all += perM(r.allCPU(), r.events)
		var pgI, pgB, wal, db float64
		for _, sh := range r.perShard {
			pgI += perM(sh.pgInstance, sh.events)
			pgB += perM(sh.pgBackends, sh.events)
			wal += float64(sh.walBytes) / float64(sh.events)
			db += float64(sh.dbBytes) / float64(sh.events)
		}
		n := float64(len(r.perShard))
		s.pgInstance += pgI / n
		s.pgBackends += pgB / n
		s.walPerEvent += wal / n
		s.dbPerEvent += db / n
		s.others = [2]float64{min(s.others[0], r.others), max(s.others[1], r.others)}
		s.load = [2]float64{min(s.load[0], r.loadStart), max(s.load[1], r.loadStart)}
	}
	for i := range out {
		s := &out[i]
		n := float64(len(s.rates))
		s.bench /= n
		s.nats /= n
		s.natsPublish /= n
		s.all /= n
		s.pgInstance /= n
		s.pgBackends /= n
		s.walPerEvent /= n
		s.dbPerEvent /= n
		slices.Sort(s.rates)
	}
	return out
}

// printSummary writes one line per shard count and the scaling of the
// median rate against the first count.
func printSummary(w io.Writer, sums []summary) {
	fmt.Fprintln(w, "\nsummary (events/s: median [min, max]; cpu_s/1M events: means over the runs; pg per shard, on its own events):")
	for _, s := range sums {
		rates := make([]string, len(s.rates))
		for i, r := range s.rates {
			rates[i] = fmt.Sprintf("%.0f", r)
		}
		fmt.Fprintf(w, "  shards=%d: %.0f events/s [%s] over %d runs; pg instance %.1f (backends %.1f); bench %.1f; nats drain %.1f + publish %.1f; all processes %.1f; wal %.0f B/event; database +%.0f B/event; others busy %.0f–%.0f%%; load at start %.2f–%.2f\n",
			s.shards, s.median(), strings.Join(rates, " "), len(s.rates), s.pgInstance, s.pgBackends, s.bench, s.nats, s.natsPublish,
			s.all, s.walPerEvent, s.dbPerEvent, 100*s.others[0], 100*s.others[1], s.load[0], s.load[1])
	}
	if len(sums) > 1 && sums[0].median() > 0 {
		for _, s := range sums[1:] {
			fmt.Fprintf(w, "  aggregate ingest at %d shards / at %d: %.2f×\n", s.shards, sums[0].shards, s.median()/sums[0].median())
		}
	}
}

// highest is the summaries' highest cost of each kind per event: the
// extrapolation's conservative input (a shard's Postgres spends more per
// event with more customers in it, whose events a batch's rollups
// aggregate less).
func highest(sums []summary) summary {
	var h summary
	for _, s := range sums {
		h.shards = max(h.shards, s.shards)
		h.pgInstance = max(h.pgInstance, s.pgInstance)
		h.pgBackends = max(h.pgBackends, s.pgBackends)
		h.bench = max(h.bench, s.bench)
		h.nats = max(h.nats, s.nats)
		h.natsPublish = max(h.natsPublish, s.natsPublish)
		h.all = max(h.all, s.all)
		h.walPerEvent = max(h.walPerEvent, s.walPerEvent)
		h.dbPerEvent = max(h.dbPerEvent, s.dbPerEvent)
	}
	return h
}

// plan is the extrapolation's assumptions: the target rate, and the
// hardware each part is given.
type plan struct {
	target       float64 // events/s
	shardCores   float64 // cores of each Postgres shard's machine
	utilization  float64 // share of each core budgeted at the target (headroom for peaks, vacuum, queries)
	natsReplicas float64 // JetStream replicas: each costs about the leader's CPU (an upper bound)
}

// estimate is the extrapolation's result.
type estimate struct {
	perShard      float64 // events/s one shard takes at the planned utilization
	shards        int
	atShard       float64 // events/s each shard gets at the target
	walMBps       float64 // WAL each shard writes at the target, MB/s
	diskTBPerDay  float64 // database growth of all shards at the target, TB a day
	pgCores       float64 // Postgres cores in all
	workerCores   float64
	natsCores     float64
	totalCores    float64
	eventsPerCore float64 // of Postgres, at 100%
}

// extrapolate sizes the shards for p.target from the per-event costs of
// s (CPU seconds per million events; WAL bytes per event), assuming that
// a shard's Postgres spends the same CPU per event on a bigger machine as
// here (its writers do not contend: each worker's batch is one
// transaction, and shards share nothing), and that workers and NATS scale
// out by adding processes and streams. It returns an error for a plan
// that cannot be computed.
func extrapolate(s summary, p plan) (estimate, error) {
	switch {
	case p.target <= 0:
		return estimate{}, fmt.Errorf("target must be positive, not %g", p.target)
	case p.shardCores <= 0:
		return estimate{}, fmt.Errorf("shard cores must be positive, not %g", p.shardCores)
	case p.utilization <= 0 || p.utilization > 1:
		return estimate{}, fmt.Errorf("utilization must be in (0, 1], not %g", p.utilization)
	case p.natsReplicas < 1:
		return estimate{}, fmt.Errorf("nats replicas must be at least 1, not %g", p.natsReplicas)
	case s.pgInstance <= 0:
		return estimate{}, fmt.Errorf("no Postgres CPU measured")
	}
	var e estimate
	e.eventsPerCore = 1e6 / s.pgInstance
	e.perShard = p.shardCores * p.utilization * e.eventsPerCore
	e.shards = int(math.Ceil(p.target / e.perShard))
	e.atShard = p.target / float64(e.shards)
	e.walMBps = e.atShard * s.walPerEvent / 1e6
	e.diskTBPerDay = p.target * 86400 * s.dbPerEvent / 1e12
	e.pgCores = p.target * s.pgInstance / 1e6 / p.utilization
	e.workerCores = p.target * s.bench / 1e6 / p.utilization
	e.natsCores = p.target * (s.nats + s.natsPublish) * p.natsReplicas / 1e6 / p.utilization
	e.totalCores = e.pgCores + e.workerCores + e.natsCores
	return e, nil
}

func printEstimate(w io.Writer, s summary, p plan, e estimate) {
	fmt.Fprintf(w, "\nextrapolation to %.0f events/s from the highest cost per event of each kind in the runs above:\n", p.target)
	fmt.Fprintf(w, "  Postgres: %.1f cpu_s/1M → %.0f events/s per core at 100%%; a shard of %g cores at %.0f%% takes %.0f events/s\n",
		s.pgInstance, e.eventsPerCore, p.shardCores, 100*p.utilization, e.perShard)
	fmt.Fprintf(w, "  → %d shards (%.0f events/s each, %.1f MB/s of WAL each at %.0f B/event); %.0f Postgres cores in all\n",
		e.shards, e.atShard, e.walMBps, s.walPerEvent, e.pgCores)
	fmt.Fprintf(w, "  meter workers: %.1f cpu_s/1M → %.0f cores; NATS (R%.0f, drain %.1f + publish %.1f cpu_s/1M per replica) → %.0f cores; %.0f cores in all\n",
		s.bench, e.workerCores, p.natsReplicas, s.nats, s.natsPublish, e.natsCores, e.totalCores)
	fmt.Fprintf(w, "  the ledger grows by %.0f B/event: %.1f TB a day across the shards\n", s.dbPerEvent, e.diskTBPerDay)
}
