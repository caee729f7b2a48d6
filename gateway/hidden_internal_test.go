package gateway

import (
	"testing"
	"time"

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
	e := &usage.Event{CustomerID: "c", Model: "m", UsageSource: usage.SourceUpstream}
	h.observe(e, &tap.Report{}) // 0 reasoning tokens first
	e.Usage.CompletionTokens, e.Usage.ReasoningTokens = 20, 15
	for range 200 {
		h.observe(e, &tap.Report{})
	}
	if got := h.expected("c", "m"); got != 15 {
		t.Fatalf("average after 200 requests of 15 reasoning tokens = %d, want 15", got)
	}
	snap := h.snapshot()
	if snap["m"] != 15 {
		t.Fatalf("journaled %v, want m: 15", snap)
	}
	h2 := newHiddenReasoning()
	h2.seed(snap)
	if got := h2.expected("another", "m"); got != 15 {
		t.Fatalf("seeded average = %d, want 15", got)
	}
}

// TestHiddenReasoningIsNoOtherCustomersToSet: the estimate was one average
// per model, learnt from every customer's requests, so a customer could
// set another's bill (found by review): 20 requests with max_tokens 2
// took a cancelled stream of another customer from 600 hidden reasoning
// tokens to 2, and 20 with a large limit billed it 21 times over. A
// customer is now estimated from its own requests, and a new one from the
// median of the customers' averages.
func TestHiddenReasoningIsNoOtherCustomersToSet(t *testing.T) {
	h := newHiddenReasoning()
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	h.now = func() time.Time { return now }
	learn := func(customer string, reasoning int64, times int) { learnFrom(h, customer, reasoning, times) }
	learn("victim", 600, 30)
	learn("honest-1", 500, 30)
	learn("honest-2", 700, 30)
	now = now.Add(medianEvery)
	if got := h.expected("new", "o"); got != 600 {
		t.Fatalf("a new customer's estimate = %d, want 600: the median of 500, 600 and 700", got)
	}

	// The attacker's requests, cheap then costly, move its own average
	// alone.
	learn("attacker", 2, 25)
	learn("attacker", 40000, 25)
	now = now.Add(medianEvery)
	if got := h.expected("victim", "o"); got != 600 {
		t.Errorf("the victim's estimate after the attacker's requests = %d, want its own 600", got)
	}
	if got := h.expected("attacker", "o"); got < 38000 {
		t.Errorf("the attacker's estimate = %d, want its own (near 40,000: 25 requests at a weight of 1/8)", got)
	}
	if got := h.expected("new", "o"); got != 600 {
		t.Errorf("a new customer's estimate with the attacker = %d, want 600: the lower middle of 500, 600, 700 and its own", got)
	}
	learn("attacker2", 0, 25)
	learn("attacker3", 0, 25)
	learn("attacker4", 0, 25)
	if got := h.expected("new", "o"); got != 600 {
		t.Errorf("the median within medianEvery of its last computation = %d, want 600 as computed", got)
	}
	now = now.Add(medianEvery)
	if got, want := h.expected("new", "o"), int64(500); got != want {
		t.Errorf("the median of 0, 0, 0, 500, 600, 700, 38580 = %d, want %d", got, want)
	}

	// Past maxPairs a customer is estimated from the median.
	h.pairs = maxPairs
	learn("late", 9000, 10)
	if got := h.expected("late", "o"); got != 500 {
		t.Errorf("a customer past maxPairs = %d, want the median 500", got)
	}
}

// TestHiddenReasoningSeedStandsUntilThreeCustomers: after a restart the
// journaled median was replaced by the first customer's own average, and
// with two customers the median was their mean, so one customer set a
// new customer's estimate after all (found by code review). The seed
// stands until three customers have averages, and of two the lower is
// taken.
func TestHiddenReasoningSeedStandsUntilThreeCustomers(t *testing.T) {
	h := newHiddenReasoning()
	h.seed(map[string]int64{"o": 600})
	learnFrom(h, "attacker", 40000, 40)
	learnFrom(h, "another", 500, 40)
	if got := h.expected("new", "o"); got != 600 {
		t.Errorf("a new customer's estimate with two customers seen = %d, want the journaled 600", got)
	}
	if snap := h.snapshot(); snap["o"] != 600 {
		t.Errorf("journaled %v, want the seed 600 kept", snap)
	}
	learnFrom(h, "third", 700, 40)
	if got := h.expected("new", "o"); got != 700 {
		t.Errorf("with three customers (500, 700, about 40000) = %d, want 700", got)
	}
	h2 := newHiddenReasoning()
	learnFrom(h2, "honest", 600, 40)
	learnFrom(h2, "attacker", 40000, 40)
	if got := h2.expected("new", "o"); got != 600 {
		t.Errorf("no seed, two customers (600, about 40000) = %d, want the lower, 600", got)
	}
}

// TestHiddenReasoningCannotBeTrainedDown (an attacker's review): a
// customer taught its own average with requests that reasoned little, then
// cut its costly streams short (it hung up; they outran the drain), and
// their reasoning went unbilled: ten requests of max_tokens 2 took a cut
// stream's 2,000 reasoning tokens to 1. A customer's estimate is now at
// least the model's median, which no one customer sets; it still rises
// with its own costly requests.
func TestHiddenReasoningCannotBeTrainedDown(t *testing.T) {
	h := newHiddenReasoning()
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	h.now = func() time.Time { return now }
	learnFrom(h, "honest-1", 1800, 30)
	learnFrom(h, "honest-2", 2000, 30)
	learnFrom(h, "honest-3", 2200, 30)
	learnFrom(h, "attacker", 2000, 30)
	learnFrom(h, "attacker", 1, 40) // its cheap requests
	now = now.Add(medianEvery)
	if got := h.expected("attacker", "o"); got != 1800 {
		t.Errorf("the attacker's estimate after 40 cheap requests = %d, want the median, 1800 (the lower middle of its own, 1800, 2000 and 2200)", got)
	}
	learnFrom(h, "costly", 9000, 40)
	if got := h.expected("costly", "o"); got < 8900 {
		t.Errorf("a customer whose requests reason more = %d, want its own (near 9000)", got)
	}
}

// learnFrom has h observe times requests of customer to model "o" whose
// provider reported reasoning hidden reasoning tokens.
func learnFrom(h *hiddenReasoning, customer string, reasoning int64, times int) {
	for range times {
		h.observe(&usage.Event{CustomerID: customer, Model: "o", UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{CompletionTokens: reasoning + 10, ReasoningTokens: reasoning}}, &tap.Report{})
	}
}

// TestHiddenEstimateFollowsTheRequest: the estimate reads what the request
// asked for. Reasoning turned off (OpenAI's effort "none", a Gemini
// thinkingBudget of 0) adds none, though the customer's average is below
// the model's median (a review: the median floor billed such a customer
// other customers' reasoning); effort "minimal" takes the customer's own
// average; any other the larger of its own and the median; and never more
// than the request's stated output limit leaves after its output.
func TestHiddenEstimateFollowsTheRequest(t *testing.T) {
	h := newHiddenReasoning()
	learnFrom(h, "a", 1700, 30)
	learnFrom(h, "b", 1800, 30)
	learnFrom(h, "c", 1900, 30)
	learnFrom(h, "light", 100, 40)
	const chat, responses, gemini = "/chat/completions", "/responses", "/models/o:streamGenerateContent?alt=sse"
	for _, c := range []struct {
		name, customer, path, body string
		visible, want              int64
	}{
		{"effort unsaid", "light", chat, `{"model":"o"}`, 0, 1700},
		{"effort high", "light", chat, `{"model":"o","reasoning_effort":"high"}`, 0, 1700},
		{"effort none", "light", chat, `{"model":"o","reasoning_effort":"none"}`, 0, 0},
		{"effort none, said again as high (the last is read)", "light", chat, `{"reasoning_effort":"none","reasoning_effort":"high"}`, 0, 1700},
		{"effort minimal", "light", chat, `{"reasoning_effort":"minimal"}`, 0, 100},
		{"effort minimal, no average of its own", "new", chat, `{"reasoning_effort":"minimal"}`, 0, 1700},
		{"Responses effort none", "light", responses, `{"reasoning":{"effort":"none"}}`, 0, 0},
		{"Responses effort escaped", "light", responses, `{"reasoning":{"effort":"n\u006fne"}}`, 0, 0},
		{"Gemini thinking off", "light", gemini, `{"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`, 0, 0},
		{"Gemini thinking dynamic", "light", gemini, `{"generationConfig":{"thinkingConfig":{"thinkingBudget":-1}}}`, 0, 1700},
		{"a stated limit", "light", chat, `{"max_completion_tokens":500}`, 100, 400},
		{"a stated limit the output used up", "light", chat, `{"max_completion_tokens":500}`, 600, 0},
		{"Gemini's limit", "light", gemini, `{"generationConfig":{"maxOutputTokens":300}}`, 0, 300},
	} {
		if got := h.estimate(c.customer, "o", []byte(c.body), c.path, c.visible); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if got := h.estimate("light", "unseen", []byte(`{}`), chat, 0); got != 0 {
		t.Errorf("a model not seen: %d, want 0", got)
	}
}

// TestHiddenReasoningLearnsNoMoreThanTheCompletion (an upstream review): a
// provider's report whose reasoning_tokens exceed its completion_tokens
// (OpenRouter's error frames send such figures; the ledger stores them
// with the correction reasoning_over_completion and rates the reasoning
// as at most the completion) was learnt whole. One report of 5 completion
// and 1,000,000 reasoning tokens made the next stream cut short, of that
// customer and, through the median, of every customer of the model
// without an average of its own, bill 1,000,002 completion tokens for
// 2 tokens of output (no max_tokens bounded it). What is learnt is the
// reasoning the ledger bills: at most the completion.
func TestHiddenReasoningLearnsNoMoreThanTheCompletion(t *testing.T) {
	h := newHiddenReasoning()
	h.observe(&usage.Event{CustomerID: "c", Model: "m", UsageSource: usage.SourceUpstream,
		Usage: usage.Tokens{PromptTokens: 10, CompletionTokens: 5, ReasoningTokens: 1_000_000}}, &tap.Report{})
	if got := h.expected("c", "m"); got > 5 {
		t.Fatalf("the customer's estimate after a report of 5 completion tokens = %d, want at most 5", got)
	}
	if got := h.expected("another", "m"); got > 5 {
		t.Fatalf("another customer's estimate (the median) = %d, want at most 5", got)
	}
}
