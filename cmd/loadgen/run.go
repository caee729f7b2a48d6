package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// roles whose CPU time loadgen reads, in table order.
var roles = []string{"sim", "proxy", targetTollgate, targetTollgateH2C, targetTollgateBase, targetTollgateSplit,
	splitNATS, splitMeter, splitAdmin, "loadgen"}

// snapshot is the CPU time of every process of the run at one instant.
type snapshot struct {
	at          time.Time
	cpu         map[string]float64 // seconds, by role
	pg          pgCPU
	busy, total float64 // machine CPU seconds since boot
}

// window is one target's measured stretch of one round.
type window struct {
	target  string
	round   int
	elapsed time.Duration // first request sent → last request finished
	reqs    int64
	ok      int64
	chunks  int64
	status  int64 // requests answered 200 (the ledger must hold these)
	errs    map[string]int64
	ttft    *hist
	gap     *hist
	// cpu is each role's CPU seconds over the CPU window, which is the load
	// window plus, for tollgate, the time until the ledger showed every
	// request (the meter's tail).
	cpu      map[string]float64
	pg       pgCPU
	cpuSpan  time.Duration
	busy     float64 // fraction of all CPUs busy over the CPU window
	lag      time.Duration
	ledgerN  int64
	ledgerOK bool // the ledger showed exactly the requests answered 200
	ledger   error
	windows  int // windows added up in this one
}

func (w *window) add(o *window) {
	w.elapsed += o.elapsed
	w.reqs += o.reqs
	w.ok += o.ok
	w.chunks += o.chunks
	w.status += o.status
	for k, v := range o.errs {
		w.errs[k] += v
	}
	w.ttft.merge(o.ttft)
	w.gap.merge(o.gap)
	for k, v := range o.cpu {
		w.cpu[k] += v
	}
	w.pg.db += o.pg.db
	w.pg.bg += o.pg.bg
	// busy is averaged over the CPU windows' lengths.
	if span := (w.cpuSpan + o.cpuSpan).Seconds(); span > 0 {
		w.busy = (w.busy*w.cpuSpan.Seconds() + o.busy*o.cpuSpan.Seconds()) / span
	}
	w.cpuSpan += o.cpuSpan
	w.lag = max(w.lag, o.lag)
	if o.ledger != nil {
		w.ledger = o.ledger
	}
	w.ledgerOK = o.ledgerOK && (w.windows == 0 || w.ledgerOK)
	w.ledgerN = o.ledgerN
	w.windows++
}

func newWindow(target string, round int) *window {
	return &window{target: target, round: round, errs: map[string]int64{}, ttft: newHist(), gap: newHist(),
		cpu: map[string]float64{}}
}

// worker is one concurrent client: its own histograms, reset each window.
type worker struct {
	ttft, gap *hist
	errs      map[string]int64
	reqs, ok  int64
	chunks    int64
	status    int64
	streamers map[string]*streamer
}

// runner runs the interleaved rounds of the standard and short modes.
type runner struct {
	cfg      *config
	st       *stack
	log      io.Writer
	body     []byte
	workers  []*worker
	expected map[string]int64 // by tollgate target, requests answered 200 so far: its ledger must show them all
	prof     *cpuProfiler     // -cpu-profile-dir: the tollgate target's CPU profile over each measured window; nil without
	profErr  error            // why a profile was not saved
}

func newRunner(cfg *config, st *stack, log io.Writer) *runner {
	r := &runner{cfg: cfg, st: st, log: log, expected: map[string]int64{},
		body: requestBody(cfg.model, cfg.stream, cfg.chunks, cfg.promptWords, cfg.chunkDelayMs)}
	clients := map[string]*streamer{}
	for _, t := range cfg.targets {
		key := st.key(t)
		clients[t] = &streamer{client: newClient(cfg.concurrency, 2*time.Minute), url: st.url(t) + "/v1/chat/completions",
			key: key, body: r.body, stream: cfg.stream, want: cfg.chunks}
	}
	if !cfg.stream {
		for _, s := range clients {
			s.want = 0
		}
	}
	for range cfg.concurrency {
		w := &worker{ttft: newHist(), gap: newHist(), errs: map[string]int64{}, streamers: map[string]*streamer{}}
		for t, s := range clients {
			c := *s
			w.streamers[t] = &c
		}
		r.workers = append(r.workers, w)
	}
	return r
}

func (r *runner) snap() snapshot {
	s := snapshot{at: time.Now(), cpu: map[string]float64{}}
	for _, role := range roles {
		pid := -1
		if role == "loadgen" {
			pid = 0
		} else if p := r.st.pid(role); p > 0 {
			pid = p
		}
		if pid < 0 {
			continue
		}
		if c, err := procCPU(pid); err == nil {
			s.cpu[role] = c
		}
	}
	for _, name := range r.st.dbNames() {
		pg := postgresCPU(name)
		s.pg.db += pg.db
		s.pg.bg = pg.bg
	}
	s.busy, s.total = machineCPU()
	return s
}

// runWindow runs target for d (or n requests when n > 0) at the configured
// concurrency, then, for tollgate, waits until the ledger shows every
// request answered so far.
func (r *runner) runWindow(ctx context.Context, target string, round int, d time.Duration, n int64) *window {
	w := newWindow(target, round)
	before := r.snap()
	start := time.Now()
	var profiled func() error
	if g := r.st.gw(target); r.prof != nil && target == targetTollgate && round > 0 && n == 0 && g != nil && g.adminURL != "" {
		profiled = r.prof.start(ctx, g.adminURL, round, d)
	}
	deadline := start.Add(d)
	var claimed int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, wk := range r.workers {
		wk.ttft.reset()
		wk.gap.reset()
		clear(wk.errs)
		wk.reqs, wk.ok, wk.chunks, wk.status = 0, 0, 0, 0
		s := wk.streamers[target]
		wg.Go(func() {
			for ctx.Err() == nil {
				if n > 0 {
					mu.Lock()
					claimed++
					more := claimed <= n
					mu.Unlock()
					if !more {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				res := s.do(ctx, wk.gap)
				wk.reqs++
				wk.chunks += int64(res.chunks)
				if res.status == 200 {
					wk.status++
				}
				if res.err == "" {
					wk.ok++
					wk.ttft.record(res.ttft)
				} else {
					wk.errs[res.err]++
				}
			}
		})
	}
	wg.Wait()
	w.elapsed = time.Since(start)
	for _, wk := range r.workers {
		w.reqs += wk.reqs
		w.ok += wk.ok
		w.chunks += wk.chunks
		w.status += wk.status
		for k, v := range wk.errs {
			w.errs[k] += v
		}
		w.ttft.merge(wk.ttft)
		w.gap.merge(wk.gap)
	}
	if isTollgate(target) {
		r.expected[target] += w.status
		if r.st.canVerify(target) {
			w.lag, w.ledgerN, w.ledger = r.st.waitLedger(ctx, target, r.expected[target], 2*time.Minute)
			w.ledgerOK = w.ledger == nil && w.ledgerN == r.expected[target]
		}
	}
	if profiled != nil {
		if err := profiled(); err != nil && r.profErr == nil {
			r.profErr = err
		}
	}
	after := r.snap()
	w.cpuSpan = after.at.Sub(before.at)
	for k, v := range after.cpu {
		if b, ok := before.cpu[k]; ok {
			w.cpu[k] = v - b
		}
	}
	w.pg = pgCPU{db: after.pg.db - before.pg.db, bg: after.pg.bg - before.pg.bg}
	if dt := after.total - before.total; dt > 0 {
		w.busy = (after.busy - before.busy) / dt
	}
	return w
}

// runRounds warms every target up, then runs the rounds, each target in
// turn for duration/targets (order rotated each round), and returns the
// windows by target, in the order of cfg.targets, and every window.
func (r *runner) runRounds(ctx context.Context) (map[string]*window, []*window, error) {
	cfg := r.cfg
	if g := r.st.gw(targetTollgate); g != nil && g.child == nil && r.st.canVerify(targetTollgate) {
		// A running deployment: count from what its ledger already holds.
		n, err := r.st.ledgerRequests(ctx, targetTollgate)
		if err != nil {
			return nil, nil, fmt.Errorf("ledger: %w", err)
		}
		r.expected[targetTollgate] = n
	}
	if cfg.warmup > 0 {
		for _, t := range cfg.targets {
			fmt.Fprintf(r.log, "warm-up: %s for %v\n", t, cfg.warmup)
			w := r.runWindow(ctx, t, 0, cfg.warmup, 0)
			if w.ok == 0 {
				return nil, nil, fmt.Errorf("warm-up of %s: no request succeeded: %v", t, w.errs)
			}
		}
	}
	per := cfg.duration / time.Duration(len(cfg.targets))
	totals := map[string]*window{}
	for _, t := range cfg.targets {
		totals[t] = newWindow(t, 0)
	}
	var all []*window
	for round := range cfg.rounds {
		for i := range cfg.targets {
			t := cfg.targets[(i+round)%len(cfg.targets)]
			w := r.runWindow(ctx, t, round+1, per, int64(cfg.requests))
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			fmt.Fprintf(r.log, "round %d %-12s %7.0f req/s %9.0f chunks/s  TTFT p50 %7.3f ms p99 %7.3f ms  errors %d  machine busy %3.0f%%  load %s\n",
				round+1, t, float64(w.reqs)/w.elapsed.Seconds(), float64(w.chunks)/w.elapsed.Seconds(),
				ms(w.ttft.quantile(.5)), ms(w.ttft.quantile(.99)), w.reqs-w.ok, 100*w.busy, loadAvg())
			totals[t].add(w)
			all = append(all, w)
		}
	}
	if r.profErr != nil {
		return nil, nil, r.profErr
	}
	return totals, all, nil
}
