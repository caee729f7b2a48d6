package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nearestRank is the q-quantile of sorted values by the nearest-rank
// rule, the definition hist.quantile follows.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	return sorted[max(int(math.Ceil(q*float64(len(sorted)))), 1)-1]
}

func TestHistExactSmallValues(t *testing.T) {
	h := newHist()
	for v := 1; v <= 100; v++ {
		h.record(time.Duration(v))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{.01, 1}, {.5, 50}, {.9, 90}, {.99, 99}, {1, 100}} {
		if got := h.quantile(c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	// Up to 2,047 ns every value is its own bucket.
	h.reset()
	for _, v := range []time.Duration{999, 1000, 1001, 2047} {
		h.record(v)
	}
	for i, want := range []time.Duration{999, 1000, 1001, 2047} {
		if got := h.quantile(float64(i+1) / 4); got != want {
			t.Errorf("quantile(%v) = %v, want %v", float64(i+1)/4, got, want)
		}
	}
}

// TestHistNearestRank checks the rank rule where it differs from
// HdrHistogram's own (rank rounded to the nearest): of 7 values, p90 is
// the 7th (ceil 6.3) and p50 the 4th (ceil 3.5).
func TestHistNearestRank(t *testing.T) {
	h := newHist()
	for v := 7; v >= 1; v-- {
		h.record(time.Duration(v)) // ns: exact
	}
	for q, want := range map[float64]time.Duration{.5: 4, .9: 7, .14: 1, .15: 2, .01: 1} {
		if got := h.quantile(q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
}

// TestHistKnownDistribution records latencies spread evenly on a log scale
// from 1 µs to 10 minutes and checks each quantile against the exact one
// of the sorted samples: never below it, and within 1/1024 above it (3
// significant digits), with the maximum exact.
func TestHistKnownDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := math.Log(float64(time.Microsecond)), math.Log(float64(10*time.Minute))
	vals := make([]time.Duration, 200000)
	h := newHist()
	for i := range vals {
		vals[i] = time.Duration(math.Exp(lo + rng.Float64()*(hi-lo)))
		h.record(vals[i])
	}
	slices.Sort(vals)
	if h.count() != int64(len(vals)) {
		t.Fatalf("count %d, want %d", h.count(), len(vals))
	}
	for _, q := range []float64{.001, .01, .1, .5, .9, .99, .999, .9999, 1} {
		want, got := nearestRank(vals, q), h.quantile(q)
		if got < want || float64(got-want) > float64(want)/1024 {
			t.Errorf("quantile(%v) = %v, want %v to +1/1024", q, got, want)
		}
	}
	if h.quantile(1) != vals[len(vals)-1] {
		t.Errorf("max = %v, want exactly %v", h.quantile(1), vals[len(vals)-1])
	}
}

func TestHistUniformMilliseconds(t *testing.T) {
	h := newHist()
	// 1..100000 µs, each once: the q-quantile by nearest rank is q*100000 µs.
	for v := 1; v <= 100000; v++ {
		h.record(time.Duration(v) * time.Microsecond)
	}
	for q, want := range map[float64]time.Duration{.5: 50 * time.Millisecond, .9: 90 * time.Millisecond, .99: 99 * time.Millisecond} {
		if got := h.quantile(q); got < want || float64(got-want) > 0.001*float64(want) {
			t.Errorf("quantile(%v) = %v, want %v + 0.1%%", q, got, want)
		}
	}
	if got := h.quantile(1); got != 100*time.Millisecond {
		t.Errorf("max = %v, want exactly 100ms", got)
	}
}

func TestHistOutOfRange(t *testing.T) {
	h := newHist()
	h.record(-time.Second) // a clock step: counts as 0
	h.record(2 * time.Hour)
	if h.count() != 2 || h.quantile(.5) != 0 {
		t.Errorf("count %d, p50 %v; want 2 and 0", h.count(), h.quantile(.5))
	}
	if got := h.quantile(.99); got < time.Hour || got > time.Hour+time.Hour/1024 {
		t.Errorf("p99 = %v, want an hour (the top of the range)", got)
	}
	if h.quantile(1) != 2*time.Hour {
		t.Errorf("max = %v, want exactly 2h", h.quantile(1))
	}
}

func TestHistMerge(t *testing.T) {
	a, b, all := newHist(), newHist(), newHist()
	for v := 1; v <= 1000; v++ {
		d := time.Duration(v)*time.Millisecond + time.Duration(v)
		all.record(d)
		if v%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	m := newHist()
	m.merge(a)
	m.merge(b)
	m.merge(newHist()) // merging nothing changes nothing
	for _, q := range []float64{.001, .5, .9, .99, 1} {
		if m.quantile(q) != all.quantile(q) {
			t.Errorf("merged quantile(%v) = %v, want %v", q, m.quantile(q), all.quantile(q))
		}
	}
	if m.count() != all.count() || m.quantile(1) != 1000*time.Millisecond+1000 {
		t.Errorf("merged count %d max %v, want %d and 1.000001s", m.count(), m.quantile(1), all.count())
	}
	m.reset()
	empty := newHist()
	for _, h := range []*hist{m, empty} {
		if h.count() != 0 || h.quantile(.5) != 0 || h.quantile(1) != 0 {
			t.Error("an empty or reset histogram must answer 0")
		}
	}
}
