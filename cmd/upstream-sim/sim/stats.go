package sim

import "sync/atomic"

// Stats is what the simulator billed since start or the last reset: the
// ground truth a gateway's ledger is compared with. GET /stats serves it as
// JSON. The embedded Counts cover every protocol together; ByProtocol splits
// them, and its parts sum to Counts. See the package documentation for what
// each outcome counts.
type Stats struct {
	Counts
	// ByProtocol splits Counts by wire protocol.
	ByProtocol ProtocolStats `json:"by_protocol"`
	// ByDeployment counts the requests that came in under /d/{name}/, by
	// name (see Faults); absent when none did.
	ByDeployment map[string]Counts `json:"by_deployment,omitempty"`
	// HTTP2Requests counts the requests (to any endpoint but /stats) that
	// came in over HTTP/2, h2c or h2, whatever their outcome; the rest came
	// over HTTP/1.x.
	HTTP2Requests int64 `json:"http2_requests"`
}

// ProtocolStats holds the Counts of each protocol.
type ProtocolStats struct {
	OpenAI    Counts `json:"openai"`
	Anthropic Counts `json:"anthropic"`
	Gemini    Counts `json:"gemini"`
}

// Get returns the Counts of protocol p (zero for an unknown protocol).
func (ps ProtocolStats) Get(p Protocol) Counts {
	switch p {
	case OpenAI:
		return ps.OpenAI
	case Anthropic:
		return ps.Anthropic
	case Gemini:
		return ps.Gemini
	}
	return Counts{}
}

// Counts are request counts by outcome and the token sums billed. Token
// fields are sums over ended requests, in tokens, in the protocol-neutral
// terms of [Usage].
type Counts struct {
	// Requests counts model requests by outcome.
	Requests RequestStats `json:"requests"`
	// PromptTokens sums prompt tokens, cached ones included, in tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// CachedTokens sums cached prompt tokens, in tokens.
	CachedTokens int64 `json:"cached_tokens"`
	// CompletionTokens sums completion tokens (reasoning included), in tokens.
	CompletionTokens int64 `json:"completion_tokens"`
	// ReasoningTokens sums reasoning tokens, in tokens.
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Usage returns the token sums of c as a Usage.
func (c Counts) Usage() Usage {
	return Usage{PromptTokens: c.PromptTokens, CachedTokens: c.CachedTokens,
		CompletionTokens: c.CompletionTokens, ReasoningTokens: c.ReasoningTokens}
}

// add adds o to c.
func (c *Counts) add(o Counts) {
	r, q := &c.Requests, o.Requests
	r.Total += q.Total
	r.InFlight += q.InFlight
	r.OK += q.OK
	r.BadRequest += q.BadRequest
	r.Status += q.Status
	r.StreamError += q.StreamError
	r.Disconnected += q.Disconnected
	r.Stalled += q.Stalled
	r.Canceled += q.Canceled
	c.PromptTokens += o.PromptTokens
	c.CachedTokens += o.CachedTokens
	c.CompletionTokens += o.CompletionTokens
	c.ReasoningTokens += o.ReasoningTokens
}

// RequestStats counts model requests (POST /v1/chat/completions,
// /v1/messages, :generateContent, :streamGenerateContent), in requests.
// Every ended request is in Total and in exactly one outcome.
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

// outcome indexes tally.requests.
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

// counters is the concurrency-safe store behind Stats: one tally per
// protocol, in the order of protocols.
type counters struct {
	p     [len(protocols)]tally
	http2 atomic.Int64 // requests over HTTP/2 (see Stats.HTTP2Requests)
}

// tally is the counters of one protocol.
type tally struct {
	inFlight                              atomic.Int64
	requests                              [numOutcomes]atomic.Int64
	prompt, cached, completion, reasoning atomic.Int64
}

// of returns the tally of protocol p.
func (c *counters) of(p Protocol) *tally {
	for i, q := range protocols {
		if q == p {
			return &c.p[i]
		}
	}
	panic("sim: unknown protocol " + string(p))
}

// record counts one ended request and the usage it billed.
func (t *tally) record(o outcome, u Usage) {
	t.requests[o].Add(1)
	if u.PromptTokens != 0 {
		t.prompt.Add(u.PromptTokens)
	}
	if u.CachedTokens != 0 {
		t.cached.Add(u.CachedTokens)
	}
	if u.CompletionTokens != 0 {
		t.completion.Add(u.CompletionTokens)
	}
	if u.ReasoningTokens != 0 {
		t.reasoning.Add(u.ReasoningTokens)
	}
}

// snapshot reads the counters. It is not atomic as a whole: a request ending
// meanwhile may be half counted.
func (c *counters) snapshot() Stats {
	var s Stats
	for i := range c.p {
		t := c.p[i].snapshot()
		s.add(t)
		switch protocols[i] {
		case OpenAI:
			s.ByProtocol.OpenAI = t
		case Anthropic:
			s.ByProtocol.Anthropic = t
		case Gemini:
			s.ByProtocol.Gemini = t
		}
	}
	return s
}

func (t *tally) snapshot() Counts {
	r := RequestStats{
		InFlight:     t.inFlight.Load(),
		OK:           t.requests[outcomeOK].Load(),
		BadRequest:   t.requests[outcomeBadRequest].Load(),
		Status:       t.requests[outcomeStatus].Load(),
		StreamError:  t.requests[outcomeStreamError].Load(),
		Disconnected: t.requests[outcomeDisconnected].Load(),
		Stalled:      t.requests[outcomeStalled].Load(),
		Canceled:     t.requests[outcomeCanceled].Load(),
	}
	r.Total = r.OK + r.BadRequest + r.Status + r.StreamError + r.Disconnected + r.Stalled + r.Canceled
	return Counts{
		Requests:         r,
		PromptTokens:     t.prompt.Load(),
		CachedTokens:     t.cached.Load(),
		CompletionTokens: t.completion.Load(),
		ReasoningTokens:  t.reasoning.Load(),
	}
}

// reset zeroes every counter but the in-flight gauges.
func (c *counters) reset() {
	for i := range c.p {
		c.p[i].reset()
	}
	c.http2.Store(0)
}

// reset zeroes t's counters but its in-flight gauge.
func (t *tally) reset() {
	for j := range t.requests {
		t.requests[j].Store(0)
	}
	t.prompt.Store(0)
	t.cached.Store(0)
	t.completion.Store(0)
	t.reasoning.Store(0)
}
