package gateway

import (
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// hiddenReasoning learns how many reasoning tokens a request spends that
// its stream does not show (OpenAI's reasoning models report
// reasoning_tokens only in the final usage), per customer and model: an
// exponential moving average over the customer's requests whose provider
// reported usage and showed no reasoning text. A request with
// output and no usage report has its reasoning estimated from it: one cut
// short by a crash (see Server.Recover), or settled without a report
// (exchange.addHiddenReasoning).
//
// A customer is estimated from its own requests alone: one model-wide
// average let any customer move every other customer's estimate (20
// requests with max_tokens 2 took another customer's cancelled stream
// from 600 hidden reasoning tokens to 2; 20 with a large limit billed it
// 21 times over). A customer with no average of its own for the model
// gets the median of the model's customers' averages, which no one
// customer sets (the lower middle one of an even count; the median an
// earlier process journaled while fewer than three customers have one).
// Nor can a customer lower its own below the model's median: its cheap
// requests that reasoned little then cut its costly streams short, the
// customer choosing which (it hangs up, and the stream outruns the drain,
// DrainTimeout), and their reasoning went unbilled (an attacker's review:
// ten requests of max_tokens 2 took a cut stream's 2,000 reasoning tokens
// to 1, and one key spent 4.2 times its daily limit in provider cost).
// A customer's estimate is the larger of its own average and the median,
// unless the request asked for the least reasoning or none, and never more
// than the request's stated output limit leaves (estimate). A customer alone on a model (or one of
// two, before a journaled median) still sets the median itself.
type hiddenReasoning struct {
	mu     sync.Mutex
	models map[string]*modelReasoning // at most maxModels
	pairs  int                        // customer averages held, at most maxPairs
	now    func() time.Time
	// changed is whether a median may have moved since the last snapshot.
	changed bool
}

// modelReasoning is one model's averages.
type modelReasoning struct {
	byCustomer map[string]int64 // tokens << hiddenFrac (fixed point)
	// median is the median of byCustomer, recomputed at most every
	// medianEvery (at and after the first average); seeded, before any
	// customer's, from the journal.
	median   int64
	computed time.Time
	stale    bool // byCustomer changed since median was computed
	// seed is the median an earlier process journaled (fixed point), when
	// seeded: it stands until minMedianCustomers customers have averages.
	seed   int64
	seeded bool
}

// minMedianCustomers is how many customers' averages a model's median
// needs before it replaces the journaled one: with one or two, the median
// is one customer's own figure.
const minMedianCustomers = 3

// hiddenShift weights each new request in the average:
// a += (x-a)>>hiddenShift, a weight of 1/8 (about the last 8 requests of
// the customer and model count). The average is kept in fixed point,
// hiddenFrac bits below the token: in whole tokens, the shift's truncation
// stopped it up to 7 tokens short of a steady value (2.6% of a crash's
// tokens unbilled in make faults).
const (
	hiddenShift = 3
	hiddenFrac  = 10
)

// maxModels bounds the models learned, and maxPairs the customer averages
// across them (names come from clients; about 100 bytes each). Past
// maxPairs, a new customer is estimated from the median.
const (
	maxModels = 4096
	maxPairs  = 1 << 16
)

// medianEvery bounds how often a model's median is recomputed: expected
// runs at every request's start, and a median over many customers is a
// sort.
const medianEvery = time.Second

func newHiddenReasoning() *hiddenReasoning {
	return &hiddenReasoning{models: map[string]*modelReasoning{}, now: time.Now}
}

// model returns the model's averages, creating them when there is room
// (nil when not).
func (h *hiddenReasoning) model(name string) *modelReasoning {
	m := h.models[name]
	if m == nil && len(h.models) < maxModels {
		m = &modelReasoning{byCustomer: map[string]int64{}}
		h.models[name] = m
	}
	return m
}

// observe learns from a settled event and its report.
func (h *hiddenReasoning) observe(e *usage.Event, r *tap.Report) {
	if e.UsageSource != usage.SourceUpstream || r.ReasoningShown {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.model(e.Model)
	if m == nil {
		return
	}
	// The reasoning the ledger bills: a report's reasoning above its
	// completion (reasoning_over_completion: OpenRouter's error frames)
	// is rated as at most the completion, and learnt so. Learnt whole, one
	// such report set the estimate of every stream of the model cut short
	// (through the median, of other customers' too).
	x := min(e.Usage.ReasoningTokens, e.Usage.CompletionTokens) << hiddenFrac
	a, ok := m.byCustomer[e.CustomerID]
	switch {
	case ok:
		m.byCustomer[e.CustomerID] = a + (x-a)>>hiddenShift
	case h.pairs < maxPairs:
		m.byCustomer[e.CustomerID] = x
		h.pairs++
	default:
		return
	}
	m.stale, h.changed = true, true
}

// seed takes the model medians an earlier process journaled (tokens, by
// model), for the models this one has no average of yet.
func (h *hiddenReasoning) seed(medians map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, a := range medians {
		if m := h.model(name); m != nil && len(m.byCustomer) == 0 {
			m.seed, m.seeded, m.median = a<<hiddenFrac, true, a<<hiddenFrac
		}
	}
}

// snapshot returns each model's median (tokens) when any may have moved
// since the last snapshot, or nil: what the journal keeps for the next
// process (seed). Customers' own averages are not journaled: they are
// learnt again, and meanwhile the median stands in.
func (h *hiddenReasoning) snapshot() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.changed {
		return nil
	}
	h.changed = false
	out := make(map[string]int64, len(h.models))
	for name, m := range h.models {
		out[name] = roundTokens(h.medianOf(m, true))
	}
	return out
}

// medianOf returns m's median (fixed point), recomputing it when stale
// and medianEvery has passed since, or when now is set: the journaled one
// while fewer than minMedianCustomers customers have averages; of an even
// count, the lower middle one, so that of two customers neither raises
// the other's estimate.
func (h *hiddenReasoning) medianOf(m *modelReasoning, now bool) int64 {
	if m.seeded && len(m.byCustomer) < minMedianCustomers {
		return m.seed
	}
	if !m.stale || len(m.byCustomer) == 0 {
		return m.median
	}
	t := h.now()
	if !now && t.Sub(m.computed) < medianEvery && !m.computed.IsZero() {
		return m.median
	}
	all := make([]int64, 0, len(m.byCustomer))
	for _, a := range m.byCustomer {
		all = append(all, a)
	}
	slices.Sort(all)
	m.median = all[(len(all)-1)/2]
	m.computed, m.stale = t, false
	return m.median
}

// roundTokens is a fixed-point average in whole tokens, rounded.
func roundTokens(a int64) int64 { return (a + 1<<(hiddenFrac-1)) >> hiddenFrac }

// expected is the hidden reasoning, in tokens, to estimate for a request
// of customer's to model: the larger of the customer's own average and the
// model's median; the median for a customer without an average (0 for a
// model not seen).
func (h *hiddenReasoning) expected(customer, model string) int64 {
	own, ok, median := h.averages(customer, model)
	if ok {
		return max(own, median)
	}
	return median
}

// averages returns customer's own average for model, in tokens, and
// whether it has one, and the model's median (see medianOf); 0 for a model
// not seen.
func (h *hiddenReasoning) averages(customer, model string) (own int64, ok bool, median int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[model]
	if m == nil {
		return 0, false, 0
	}
	a, ok := m.byCustomer[customer]
	return roundTokens(a), ok, roundTokens(h.medianOf(m, false))
}
