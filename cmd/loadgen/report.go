package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// summary is one target's figures over all its windows.
type summary struct {
	target          string
	reqPerSec       float64
	chunksPerSec    float64
	ttft            [4]time.Duration // p50, p90, p99, max
	gap50, gap99    time.Duration
	gapMax          time.Duration
	reqs, errors    int64
	chunks          int64
	cpuPerM         float64 // the target's own process, CPU s per 1M chunks
	cpuPerReq       float64 // µs per request
	addedP50        float64 // ms over the proxy's TTFT
	addedP99        float64
	cpuRatio        float64 // cpuPerM / the proxy's
	throughputRatio float64 // chunks/s / the proxy's
}

func summarize(w *window) summary {
	s := summary{target: w.target, reqs: w.reqs, errors: w.reqs - w.ok, chunks: w.chunks}
	if sec := w.elapsed.Seconds(); sec > 0 {
		s.reqPerSec = float64(w.reqs) / sec
		s.chunksPerSec = float64(w.chunks) / sec
	}
	for i, q := range []float64{.5, .9, .99, 1} {
		s.ttft[i] = w.ttft.quantile(q)
	}
	s.gap50, s.gap99, s.gapMax = w.gap.quantile(.5), w.gap.quantile(.99), w.gap.quantile(1)
	s.cpuPerM, s.cpuPerReq = math.NaN(), math.NaN()
	if c, ok := w.cpu[w.target]; ok {
		s.cpuPerM = perMillion(c, w.chunks)
		s.cpuPerReq = perMillion(c, w.reqs) // s per 1M requests = µs per request
	}
	s.addedP50, s.addedP99, s.cpuRatio, s.throughputRatio = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	return s
}

// withRatios fills each summary's comparison to the proxy's.
func withRatios(ss []summary) {
	var px *summary
	for i := range ss {
		if ss[i].target == "proxy" {
			px = &ss[i]
		}
	}
	if px == nil {
		return
	}
	for i := range ss {
		s := &ss[i]
		s.addedP50 = addedMs(s.ttft[0], px.ttft[0])
		s.addedP99 = addedMs(s.ttft[2], px.ttft[2])
		s.cpuRatio = ratio(s.cpuPerM, px.cpuPerM)
		s.throughputRatio = ratio(s.chunksPerSec, px.chunksPerSec)
	}
}

func f(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func signed(v float64, prec int) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%+.*f", prec, v)
}

// printReport writes the tables of a standard or short run.
func printReport(out io.Writer, cfg *config, totals map[string]*window, all []*window) {
	var ss []summary
	for _, t := range cfg.targets {
		ss = append(ss, summarize(totals[t]))
	}
	withRatios(ss)

	fmt.Fprintf(out, "\nPer target, all rounds (TTFT and gaps in ms; CPU of the target's own process):\n\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\treq/s\tchunks/s\tTTFT p50\tp90\tp99\tmax\tgap p50\tgap p99\tgap max\terrors\tCPU s/1M chunks\tCPU µs/req\t+TTFT p50 vs proxy\t+TTFT p99 vs proxy\tCPU × proxy\tchunks/s × proxy\t")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.target, s.reqPerSec, s.chunksPerSec, ms(s.ttft[0]), ms(s.ttft[1]), ms(s.ttft[2]), ms(s.ttft[3]),
			ms(s.gap50), ms(s.gap99), ms(s.gapMax), s.errors, s.reqs, f(s.cpuPerM, 2), f(s.cpuPerReq, 0),
			signed(s.addedP50, 3), signed(s.addedP99, 3), f(s.cpuRatio, 2), f(s.throughputRatio, 2))
	}
	tw.Flush()

	fmt.Fprintf(out, "\nCPU of every process during each target's windows, in CPU seconds per 1M chunks delivered\n"+
		"(tollgate = the whole `tollgate serve` process: gateway + meter worker + embedded JetStream;\n"+
		"tollgate-split = its `tollgate gateway` process alone, split-nats, split-meter and split-admin its other processes;\n"+
		"pg db = Postgres backends of the run's database; pg bg = Postgres' shared background processes;\n"+
		"tollgate windows run until the ledger shows every request, so they include the meter's tail;\n"+
		"machine busy = all CPUs, any process; of which these = the processes above, as a share of all CPUs):\n\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	procs := []string{"sim", "proxy"}
	anyTollgate := false
	for _, t := range cfg.targets {
		if isTollgate(t) {
			procs = append(procs, t)
			anyTollgate = true
		}
		if t == targetTollgateSplit {
			procs = append(procs, splitNATS, splitMeter, splitAdmin)
		}
	}
	fmt.Fprintln(tw, "window\t"+strings.Join(procs, "\t")+"\tpg db\tpg bg\tloadgen\tall of these\tmachine busy\tof which these\tCPU window s\t")
	for _, t := range cfg.targets {
		w := totals[t]
		var sum float64
		row := []string{t}
		for _, role := range procs {
			c, ok := w.cpu[role]
			if !ok {
				row = append(row, "-")
				continue
			}
			sum += c
			row = append(row, f(perMillion(c, w.chunks), 2))
		}
		sum += w.pg.db + w.pg.bg + w.cpu["loadgen"]
		pgdb, pgbg := "-", "-"
		if anyTollgate {
			pgdb, pgbg = f(perMillion(w.pg.db, w.chunks), 2), f(perMillion(w.pg.bg, w.chunks), 2)
		}
		row = append(row, pgdb, pgbg, f(perMillion(w.cpu["loadgen"], w.chunks), 2), f(perMillion(sum, w.chunks), 2),
			fmt.Sprintf("%.0f%%", 100*w.busy), fmt.Sprintf("%.0f%%", 100*sum/(float64(numCPU())*w.cpuSpan.Seconds())),
			fmt.Sprintf("%.1f", w.cpuSpan.Seconds()))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()

	fmt.Fprintf(out, "\nPer round (the spread between rounds is the noise):\n\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\ttarget\treq/s\tchunks/s\tTTFT p50\tTTFT p99\tCPU s/1M chunks\tmachine busy\terrors\t")
	for _, w := range all {
		s := summarize(w)
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%s\t%.0f%%\t%d\t\n", w.round, w.target, s.reqPerSec, s.chunksPerSec,
			ms(s.ttft[0]), ms(s.ttft[2]), f(s.cpuPerM, 2), 100*w.busy, s.errors)
	}
	tw.Flush()

	for _, t := range cfg.targets {
		w := totals[t]
		if len(w.errs) > 0 {
			var kinds []string
			for k, v := range w.errs {
				kinds = append(kinds, fmt.Sprintf("%s ×%d", k, v))
			}
			sort.Strings(kinds)
			fmt.Fprintf(out, "\n%s errors: %s", t, strings.Join(kinds, "; "))
		}
	}
	for _, t := range cfg.targets {
		w := totals[t]
		if !isTollgate(t) {
			continue
		}
		var lags []string
		verified := true
		for _, x := range all {
			if x.target == t {
				lags = append(lags, fmt.Sprintf("%.0f", ms(x.lag)))
				verified = verified && x.ledgerOK
			}
		}
		fmt.Fprintln(out)
		switch {
		case w.ledger != nil:
			fmt.Fprintf(out, "\n%s: LEDGER CHECK FAILED: %v\n", t, w.ledger)
		case verified && len(lags) > 0:
			fmt.Fprintf(out, "\nLedger (%s, upstream over %s): every request answered 200 (warm-up included) is in the ledger (GET /admin/v1/usage?group_by=customer);\n"+
				"time from each of its windows' last response until the ledger showed all of them: %s ms\n", t, upstreamMode(t), strings.Join(lags, ", "))
		default:
			fmt.Fprintf(out, "\n%s: ledger not verified (no admin access to the gateway)\n", t)
		}
	}
	fmt.Fprintln(out)
}

// ms renders a duration in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// addedMs is how much later b's quantile is than the baseline's, in ms:
// the difference of the two distributions' quantiles (not a quantile of
// per-request differences, which do not exist across targets).
func addedMs(b, baseline time.Duration) float64 { return ms(b) - ms(baseline) }

// ratio is a/b, NaN when b is 0 (rendered "n/a").
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// perMillion is CPU seconds per million units (chunks), NaN without units.
func perMillion(cpuSeconds float64, units int64) float64 {
	if units <= 0 {
		return math.NaN()
	}
	return cpuSeconds / float64(units) * 1e6
}
