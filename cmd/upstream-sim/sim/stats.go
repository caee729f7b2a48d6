package sim

import "sync/atomic"

// Stats is what the simulator billed since start or the last reset: the
// ground truth a gateway's ledger is compared with. GET /stats serves it as
// JSON. Token fields are sums over ended requests, in tokens; see the package
// documentation for what each outcome counts.
type Stats struct {
	// Requests counts chat completion requests by outcome.
	Requests RequestStats `json:"requests"`
	// PromptTokens sums prompt_tokens, in tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// CachedTokens sums prompt_tokens_details.cached_tokens, in tokens.
	CachedTokens int64 `json:"cached_tokens"`
	// CompletionTokens sums completion_tokens (reasoning included), in tokens.
	CompletionTokens int64 `json:"completion_tokens"`
	// ReasoningTokens sums completion_tokens_details.reasoning_tokens, in tokens.
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Usage returns the token sums of s as a Usage.
func (s Stats) Usage() Usage {
	return Usage{PromptTokens: s.PromptTokens, CachedTokens: s.CachedTokens,
		CompletionTokens: s.CompletionTokens, ReasoningTokens: s.ReasoningTokens}
}

// RequestStats counts POST /v1/chat/completions requests, in requests. Every
// ended request is in Total and in exactly one outcome.
type RequestStats struct {
	// Total counts ended requests: the sum of the outcomes.
	Total int64 `json:"total"`
	// InFlight is the number of requests being served now (a gauge that a
	// reset leaves alone).
	InFlight int64 `json:"in_flight"`
	// OK counts complete responses, streamed or not, whatever the usage faults.
	OK int64 `json:"ok"`
	// BadRequest counts requests rejected with 400 (or 413) for bad input.
	BadRequest int64 `json:"bad_request"`
	// Status counts responses with the status asked for by sim_status.
	Status int64 `json:"status"`
	// StreamError counts streams ended by error_after.
	StreamError int64 `json:"stream_error"`
	// Disconnected counts streams aborted by disconnect_after.
	Disconnected int64 `json:"disconnected"`
	// Stalled counts requests held by stall or stall_before until their
	// context ended.
	Stalled int64 `json:"stalled"`
	// Canceled counts streams whose client went away before the end.
	Canceled int64 `json:"canceled"`
}

// outcome indexes counters.requests.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeBadRequest
	outcomeStatus
	outcomeStreamError
	outcomeDisconnected
	outcomeStalled
	outcomeCanceled
	numOutcomes
)

// counters is the concurrency-safe store behind Stats.
type counters struct {
	inFlight                              atomic.Int64
	requests                              [numOutcomes]atomic.Int64
	prompt, cached, completion, reasoning atomic.Int64
}

// record counts one ended request and the usage it billed.
func (c *counters) record(o outcome, u Usage) {
	c.requests[o].Add(1)
	if u.PromptTokens != 0 {
		c.prompt.Add(u.PromptTokens)
	}
	if u.CachedTokens != 0 {
		c.cached.Add(u.CachedTokens)
	}
	if u.CompletionTokens != 0 {
		c.completion.Add(u.CompletionTokens)
	}
	if u.ReasoningTokens != 0 {
		c.reasoning.Add(u.ReasoningTokens)
	}
}

// snapshot reads the counters. It is not atomic as a whole: a request ending
// meanwhile may be half counted.
func (c *counters) snapshot() Stats {
	r := RequestStats{
		InFlight:     c.inFlight.Load(),
		OK:           c.requests[outcomeOK].Load(),
		BadRequest:   c.requests[outcomeBadRequest].Load(),
		Status:       c.requests[outcomeStatus].Load(),
		StreamError:  c.requests[outcomeStreamError].Load(),
		Disconnected: c.requests[outcomeDisconnected].Load(),
		Stalled:      c.requests[outcomeStalled].Load(),
		Canceled:     c.requests[outcomeCanceled].Load(),
	}
	r.Total = r.OK + r.BadRequest + r.Status + r.StreamError + r.Disconnected + r.Stalled + r.Canceled
	return Stats{
		Requests:         r,
		PromptTokens:     c.prompt.Load(),
		CachedTokens:     c.cached.Load(),
		CompletionTokens: c.completion.Load(),
		ReasoningTokens:  c.reasoning.Load(),
	}
}

// reset zeroes every counter but the in-flight gauge.
func (c *counters) reset() {
	for i := range c.requests {
		c.requests[i].Store(0)
	}
	c.prompt.Store(0)
	c.cached.Store(0)
	c.completion.Store(0)
	c.reasoning.Store(0)
}
