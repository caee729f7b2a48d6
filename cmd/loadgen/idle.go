package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// idleResult is what idle mode measured on one target.
type idleResult struct {
	target          string
	upstream        string // how a tollgate target reaches the simulator: HTTP/1.1 or h2c
	streams         int
	open, failed    int64
	errs            map[string]int64
	openTime        *hist // request sent → first SSE event (the stream's opening frame)
	rssBefore       int64
	rss, hwm        int64
	fdsBefore, fds  int
	simRSS          int64
	loadgenRSS      int64
	openSpan        time.Duration
	lag             time.Duration
	ledgerN, expect int64
	status5xx       int64 // 5xx answers and streams never opened: tollgate may record an event for each
	ledger          error
	verified        bool
	rt              goRuntime
	cgroup          string // the memory cgroup's limit and counters (-memory-cgroup); "" without one
}

// goRuntime is a Go process's own view of its memory, read from tollgate's
// /metrics (Prometheus' Go collector) or the proxy's memPath.
type goRuntime struct {
	ok                                       bool
	goroutines                               int64
	heapInuse, stackInuse, heapAlloc, sysMem int64
}

func readGoRuntime(ctx context.Context, url string) goRuntime {
	var g goRuntime
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return g
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return g
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return g
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			g.goroutines, g.ok = int64(v), true
		case "go_memstats_heap_inuse_bytes":
			g.heapInuse = int64(v)
		case "go_memstats_stack_inuse_bytes":
			g.stackInuse = int64(v)
		case "go_memstats_heap_alloc_bytes":
			g.heapAlloc = int64(v)
		case "go_memstats_sys_bytes":
			g.sysMem = int64(v)
		}
	}
	return g
}

// runIdle opens cfg.streams streams on each target against a simulator
// that waits sim_delay_ms = 10 minutes before its first content chunk, so
// every stream stays open and silent after its opening frame; once all are
// open it reads the target process's RSS, then abandons them. expected is
// how many requests each tollgate target's ledger held before (nil: none);
// it is updated.
func runIdle(ctx context.Context, cfg *config, st *stack, log io.Writer, expected map[string]int64) ([]*idleResult, error) {
	body := requestBody(cfg.model, true, 1, cfg.promptWords, 600000)
	if expected == nil {
		expected = map[string]int64{}
	}
	var out []*idleResult
	for _, t := range cfg.targets {
		pid := st.pid(t)
		key := st.key(t)
		// Warm up with a few ordinary streams.
		warm := &streamer{client: newClient(8, time.Minute), url: st.url(t) + "/v1/chat/completions", key: key,
			body: requestBody(cfg.model, true, 10, cfg.promptWords, 0), stream: true, want: 10}
		for range 20 {
			if res := warm.do(ctx, nil); res.status == 200 && isTollgate(t) {
				expected[t]++
			}
		}
		warm.client.CloseIdleConnections()
		time.Sleep(500 * time.Millisecond)

		res := &idleResult{target: t, streams: cfg.streams, errs: map[string]int64{}, openTime: newHist()}
		if isTollgate(t) {
			res.upstream = upstreamMode(t)
		}
		if pid > 0 {
			res.rssBefore, _, _ = procMem(pid)
			res.fdsBefore = fdCount(pid)
		}
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 60 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1, MaxConnsPerHost: 0, DisableCompression: true,
		}
		client := &http.Client{Transport: tr}
		hold, release := context.WithCancel(ctx)
		sem := make(chan struct{}, cfg.openParallel)
		var opened, failed, status200, status5xx atomic.Int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		fmt.Fprintf(log, "idle: opening %d streams on %s (%d at a time)\n", cfg.streams, t, cfg.openParallel)
		launched := make(chan struct{})
		go func() {
			defer close(launched)
			for range cfg.streams {
				select {
				case sem <- struct{}{}:
				case <-hold.Done():
					return
				}
				wg.Go(func() {
					released := false
					rel := func() {
						if !released {
							released = true
							<-sem
						}
					}
					defer rel()
					fail := func(kind string) {
						failed.Add(1)
						mu.Lock()
						res.errs[kind]++
						mu.Unlock()
					}
					req, _ := http.NewRequestWithContext(hold, http.MethodPost, st.url(t)+"/v1/chat/completions", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					if key != "" {
						req.Header.Set("Authorization", "Bearer "+key)
					}
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						fail(transportErr(err))
						return
					}
					defer resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						if resp.StatusCode >= 500 {
							status5xx.Add(1)
						}
						fail(fmt.Sprintf("HTTP %d", resp.StatusCode))
						return
					}
					status200.Add(1)
					br := bufio.NewReaderSize(resp.Body, 512)
					for {
						line, err := br.ReadSlice('\n')
						if bytes.HasPrefix(line, dataPrefix) {
							break
						}
						if err != nil && err != bufio.ErrBufferFull {
							fail("closed before its first event: " + transportErr(err))
							return
						}
					}
					d := time.Since(t0)
					mu.Lock()
					res.openTime.record(d)
					mu.Unlock()
					opened.Add(1)
					rel()
					// Hold the stream until released.
					_, _ = io.Copy(io.Discard, br)
				})
			}
		}()
		deadline := time.Now().Add(cfg.openTimeout)
		last := time.Now()
		for opened.Load()+failed.Load() < int64(cfg.streams) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if time.Since(last) > 5*time.Second {
				last = time.Now()
				fmt.Fprintf(log, "idle: %s: %d open, %d failed\n", t, opened.Load(), failed.Load())
			}
		}
		res.openSpan = time.Since(start)
		time.Sleep(cfg.idleSettle) // let the last opens settle
		res.open, res.failed = opened.Load(), failed.Load()
		if pid > 0 {
			res.rss, res.hwm, _ = procMem(pid)
			res.fds = fdCount(pid)
		}
		if g := st.gw(t); g != nil && g.adminURL != "" {
			res.rt = readGoRuntime(ctx, g.adminURL+"/metrics")
		} else if t == "proxy" {
			res.rt = readGoRuntime(ctx, st.proxyURL+memPath)
		}
		if p := st.pid("sim"); p > 0 {
			res.simRSS, _, _ = procMem(p)
		}
		if self, _, err := procMemSelf(); err == nil {
			res.loadgenRSS = self
		}
		fmt.Fprintf(log, "idle: %s: %d open, %d failed %v; RSS %.0f MiB (before %.0f MiB), fds %d; load %s\n",
			t, res.open, res.failed, res.errs, mib(res.rss), mib(res.rssBefore), res.fds, loadAvg())
		if pending := int64(cfg.streams) - res.open - res.failed; pending > 0 {
			res.errs["not open by the deadline"] = pending
			res.failed += pending
			res.status5xx += pending // may reach the upstream, and the ledger, all the same
		}
		release()
		<-launched
		wg.Wait()
		tr.CloseIdleConnections()
		if isTollgate(t) {
			expected[t] += status200.Load()
			res.expect = expected[t]
			res.status5xx += status5xx.Load()
			if st.canVerify(t) {
				res.lag, res.ledgerN, res.ledger = st.waitLedger(ctx, t, expected[t], 2*time.Minute)
				if res.ledger == nil && res.status5xx > 0 {
					// Give the events of the failed requests time to land.
					time.Sleep(2 * time.Second)
					res.ledgerN, res.ledger = st.ledgerRequests(ctx, t)
				}
				res.verified = res.ledger == nil && res.ledgerN >= expected[t] && res.ledgerN <= expected[t]+res.status5xx
				expected[t] = max(expected[t], res.ledgerN)
			}
		}
		res.cgroup = st.cgroupLine(t)
		// Wait for the target to let go of its connections.
		if pid > 0 {
			for i := 0; i < 600 && fdCount(pid) > res.fdsBefore+50; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

func procMemSelf() (int64, int64, error) { return procMem(syscall.Getpid()) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func printIdle(w io.Writer, rs []*idleResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tupstream\tstreams\topen\tfailed\topen p50 ms\topen p99 ms\topen max ms\tRSS before MiB\tRSS open MiB\tpeak RSS MiB\tKiB/stream\tgoroutines\theap in use MiB\tstacks MiB\tfds\tsim RSS MiB\t")
	for _, r := range rs {
		per := 0.0
		if r.open > 0 {
			per = float64(r.rss-r.rssBefore) / 1024 / float64(r.open)
		}
		gor, heap, stacks := "n/a", "n/a", "n/a"
		if r.rt.ok {
			gor, heap, stacks = fmt.Sprint(r.rt.goroutines), fmt.Sprintf("%.0f", mib(r.rt.heapInuse)), fmt.Sprintf("%.0f", mib(r.rt.stackInuse))
		}
		up := r.upstream
		if up == "" {
			up = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.1f\t%s\t%s\t%s\t%d\t%.0f\t\n",
			r.target, up, r.streams, r.open, r.failed, ms(r.openTime.quantile(.5)), ms(r.openTime.quantile(.99)),
			ms(r.openTime.quantile(1)), mib(r.rssBefore), mib(r.rss), mib(r.hwm), per, gor, heap, stacks, r.fds, mib(r.simRSS))
	}
	tw.Flush()
	for _, r := range rs {
		if len(r.errs) > 0 {
			fmt.Fprintf(w, "%s: failures: %v\n", r.target, r.errs)
		}
		if r.cgroup != "" {
			fmt.Fprintln(w, r.cgroup)
		}
		if isTollgate(r.target) {
			switch {
			case r.verified:
				fmt.Fprintf(w, "%s: the ledger holds every request answered 200 (%d, abandoned streams and warm-up included; %d answered 5xx or never opened, which may be recorded as upstream errors: ledger total %d), %.0f ms after the streams were released\n",
					r.target, r.expect, r.status5xx, r.ledgerN, ms(r.lag))
			case r.ledger != nil:
				fmt.Fprintf(w, "%s: LEDGER CHECK FAILED: %v (expected %d)\n", r.target, r.ledger, r.expect)
			default:
				fmt.Fprintf(w, "%s: LEDGER CHECK FAILED: ledger %d, expected %d to %d\n", r.target, r.ledgerN, r.expect, r.expect+r.status5xx)
			}
		}
	}
}
