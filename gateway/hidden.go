package gateway

import (
	"sync"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// hiddenReasoning learns, per model, how many reasoning tokens a request
// spends that its stream does not show (OpenAI's reasoning models report
// reasoning_tokens only in the final usage): an exponential moving
// average, over the requests whose provider reported usage and showed no
// reasoning text. A request with output and no usage report has its
// reasoning estimated as this average: one cut short by a crash (see
// Server.Recover), or settled without a report (exchange.addHiddenReasoning).
type hiddenReasoning struct {
	mu      sync.Mutex
	avg     map[string]int64 // tokens << hiddenFrac (fixed point)
	changed bool             // since the last snapshot
}

// hiddenShift weights each new request in the average:
// a += (x-a)>>hiddenShift, a weight of 1/8 (about the last 8 requests of
// the model count). The average is kept in fixed point, hiddenFrac bits
// below the token: in whole tokens, the shift's truncation stopped it up
// to 7 tokens short of a steady value (2.6% of a crash's tokens unbilled
// in make faults).
const (
	hiddenShift = 3
	hiddenFrac  = 10
)

// maxModels bounds the models learned (names come from clients).
const maxModels = 4096

func newHiddenReasoning() *hiddenReasoning { return &hiddenReasoning{avg: map[string]int64{}} }

// observe learns from a settled event and its report.
func (h *hiddenReasoning) observe(e *usage.Event, r *tap.Report) {
	if e.UsageSource != usage.SourceUpstream || r.ReasoningShown {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.avg[e.Model]
	switch {
	case ok:
		h.avg[e.Model] = a + (e.Usage.ReasoningTokens<<hiddenFrac-a)>>hiddenShift
	case len(h.avg) < maxModels:
		h.avg[e.Model] = e.Usage.ReasoningTokens << hiddenFrac
	}
	h.changed = true
}

// seed takes the averages an earlier process learnt (from the crash
// journal), for the models this one has not seen yet.
func (h *hiddenReasoning) seed(avg map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for m, a := range avg {
		if _, ok := h.avg[m]; !ok && len(h.avg) < maxModels {
			h.avg[m] = a << hiddenFrac
		}
	}
}

// snapshot returns a copy of the averages when they changed since the
// last snapshot, or nil.
func (h *hiddenReasoning) snapshot() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.changed {
		return nil
	}
	h.changed = false
	out := make(map[string]int64, len(h.avg))
	for m, a := range h.avg {
		out[m] = roundTokens(a)
	}
	return out
}

// roundTokens is a fixed-point average in whole tokens, rounded.
func roundTokens(a int64) int64 { return (a + 1<<(hiddenFrac-1)) >> hiddenFrac }

// expected is the model's average hidden reasoning, in tokens.
func (h *hiddenReasoning) expected(model string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return roundTokens(h.avg[model])
}
