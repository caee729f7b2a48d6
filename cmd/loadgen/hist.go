package main

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The histograms record nanoseconds from 1 ns to an hour with 3
// significant digits. HdrHistogram then keeps 2,048 sub-buckets per power
// of two: values up to 2,047 ns are exact, and a larger one lands in a
// bucket no wider than 1/1024 of its value, so any latency from a
// microsecond to minutes is read exact to at least 3 significant digits
// (within 0.1%; the hand-written histogram this replaced was within
// 0.4%). Each histogram takes about 270 KiB whatever it holds.
const (
	histLowest  = 1 // ns
	histHighest = int64(time.Hour)
	histDigits  = 3
)

// hist is a latency histogram: an HdrHistogram and the exact maximum.
// Each worker keeps its own and they are merged after a window, so nothing
// is shared on the hot path. It is not safe for concurrent use.
type hist struct {
	h   *hdrhistogram.Histogram
	max time.Duration
}

func newHist() *hist {
	return &hist{h: hdrhistogram.New(histLowest, histHighest, histDigits)}
}

// record adds d. A negative d counts as 0, and one beyond an hour as an
// hour, though it still sets the exact maximum.
func (h *hist) record(d time.Duration) {
	d = max(d, 0)
	h.max = max(h.max, d)
	// In range once clamped, so RecordValue cannot fail.
	_ = h.h.RecordValue(min(int64(d), histHighest))
}

// merge adds o's values to h. Both have the same range, so none is dropped.
func (h *hist) merge(o *hist) {
	h.h.Merge(o.h)
	h.max = max(h.max, o.max)
}

func (h *hist) reset() {
	h.h.Reset()
	h.max = 0
}

// count is the number of values recorded.
func (h *hist) count() int64 { return h.h.TotalCount() }

// quantile returns the q-quantile (0 < q <= 1) by the nearest-rank rule:
// the value at rank ceil(q*n), read as the highest value of its bucket but
// never above the exact maximum. q = 1 is the exact maximum. An empty
// histogram answers 0.
func (h *hist) quantile(q float64) time.Duration {
	n := h.h.TotalCount()
	if n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := max(math.Ceil(q*float64(n)), 1)
	// HdrHistogram takes rank int(p/100*n + 0.5), rounding to the nearest;
	// asking for rank-0.25 gives exactly rank, away from the rounding edge.
	v := h.h.ValueAtPercentile(100 * (rank - 0.25) / float64(n))
	return min(time.Duration(v), h.max)
}
