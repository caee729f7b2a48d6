package main

import (
	"math"
	"math/bits"
	"time"
)

// hist is an HDR-like histogram of durations in nanoseconds: exact below
// 256 ns, then 128 buckets per power of two, so a quantile is within 0.4%
// of a recorded value (it answers the bucket's midpoint, clamped to the
// exact min and max). Memory is fixed (about 58 KiB) whatever the count,
// and histograms merge by adding counts, so each worker keeps its own and
// nothing is shared on the hot path.
type hist struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      uint64
	min, max uint64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // buckets per power of two
	// histBuckets covers every uint64: shift up to 64-1-histSubBits.
	histBuckets = (64-histSubBits)*histSub + histSub
)

// histIndex maps v to its bucket.
func histIndex(v uint64) int {
	n := bits.Len64(v)
	if n <= histSubBits+1 {
		return int(v) // exact: 0..255
	}
	s := n - histSubBits - 1
	return s*histSub + int(v>>s)
}

// histRange is the smallest and largest value of bucket i.
func histRange(i int) (lo, hi uint64) {
	if i < 2*histSub {
		return uint64(i), uint64(i)
	}
	s := i/histSub - 1
	top := uint64(i - s*histSub)
	return top << s, (top+1)<<s - 1
}

func (h *hist) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

func (h *hist) reset() { *h = hist{} }

// quantile returns the q-quantile (0 < q <= 1) by the nearest-rank rule:
// the value at rank ceil(q*n). q = 1 is the exact maximum. An empty
// histogram answers 0.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			lo, hi := histRange(i)
			mid := lo + (hi-lo)/2
			return time.Duration(min(max(mid, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *hist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
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
