package gateway

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestHiddenReasoningAverageReachesASteadyValue: the average is integer
// arithmetic. Kept in whole tokens, a += (x-a)>>3 stopped up to 7 tokens
// short of a value that then stayed the same (and crashed requests were
// billed that much less); in fixed point it reaches it, and what is
// journaled is that value, which seeds the next process as it was.
func TestHiddenReasoningAverageReachesASteadyValue(t *testing.T) {
	h := newHiddenReasoning()
	e := &usage.Event{Model: "m", UsageSource: usage.SourceUpstream}
	h.observe(e, &tap.Report{}) // 0 reasoning tokens first
	e.Usage.ReasoningTokens = 15
	for range 200 {
		h.observe(e, &tap.Report{})
	}
	if got := h.expected("m"); got != 15 {
		t.Fatalf("average after 200 requests of 15 reasoning tokens = %d, want 15", got)
	}
	snap := h.snapshot()
	if snap["m"] != 15 {
		t.Fatalf("journaled %v, want m: 15", snap)
	}
	h2 := newHiddenReasoning()
	h2.seed(snap)
	if got := h2.expected("m"); got != 15 {
		t.Fatalf("seeded average = %d, want 15", got)
	}
}
