package gateway

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// defaultHoldOutputTokens is the output a request that sets no output
// limit is held for against a spend limit: the max_tokens Tollgate sends
// Anthropic for such a request (anthropic.DefaultMaxTokens).
const defaultHoldOutputTokens = 4096

// maxHoldOutputTokens bounds the output a request is held for: 128
// choices of 100,000 tokens and more, and a rating that cannot overflow
// at any real price (10^8 tokens × $9,000 per 1M is within an int64 of
// 1e-12 units).
const maxHoldOutputTokens = 100_000_000

// unratable is the hold of a request the gateway cannot rate (its cost
// would overflow): a million units of the currency, so that it is admitted
// only while nothing else is in flight.
const unratable = 1 << 50

// holdEstimate is the most a request by key k, served by attempts, may
// cost, in nano-units of k's currency (rounded up): for each attempt, its
// prompt's estimate (its upstream body's bytes / 4, as the tpm_limit's)
// and its output limit (outputLimit; none for embeddings), rated as the
// ledger will with the prompt all uncached or all written to the cache
// and the output all reasoning or none, whichever costs more; the largest
// over the attempts, whose fallbacks may be priced higher. 0 when the
// gateway has no Rater; unratable when a rating fails.
func (s *Server) holdEstimate(k *usage.KeyState, attempts []prepared, endpoint string, now time.Time) int64 {
	if s.rates == nil {
		return 0
	}
	most := int64(0)
	for _, a := range attempts {
		prompt, output := int64(len(a.body)/4), int64(0)
		if endpoint != "/v1/embeddings" {
			output = outputLimit(a.body)
		}
		for _, u := range [...]usage.Tokens{
			{PromptTokens: prompt, CompletionTokens: output},
			{PromptTokens: prompt, CacheWriteTokens: prompt, CompletionTokens: output, ReasoningTokens: output},
			{PromptTokens: prompt, CacheWriteTokens: prompt, CompletionTokens: output},
			{PromptTokens: prompt, CompletionTokens: output, ReasoningTokens: output},
		} {
			e := usage.Event{CustomerID: k.CustomerID, KeyID: k.KeyID, Model: a.route().model, Time: now,
				Status: usage.StatusOK, Usage: u}
			r, ok := s.rates.Rate(&e)
			if !ok {
				return unratable
			}
			most = max(most, chargeNanos(r))
		}
	}
	return most
}

// chargeNanos is r's charge (its cost after its discount) in nano-units,
// rounded up; 0 when unpriced.
func chargeNanos(r usage.Rating) int64 {
	if r.Unpriced || r.CostE12 <= 0 {
		return 0
	}
	n := new(big.Int).Mul(big.NewInt(r.CostE12), big.NewInt(int64(10000-r.DiscountBP)))
	n.Add(n, big.NewInt(1e7-1))
	n.Quo(n, big.NewInt(1e7)) // 1e-12 units × 1e-4 (basis points) → nano-units
	if !n.IsInt64() || n.Int64() > unratable {
		return unratable
	}
	return n.Int64()
}

// outputLimit is the most output tokens a request body may be billed for,
// as any of the APIs Tollgate serves reads it: the largest of its
// max_tokens, max_completion_tokens, max_output_tokens,
// max_tokens_to_sample and generationConfig's maxOutputTokens, whatever
// their case or escapes (an upstream may match names as encoding/json
// does, and a native route's body goes upstream as it came), times its
// choices: n or best_of, generationConfig's candidateCount, and a
// completions prompt's array of prompts. A limit or a count that is there
// but not a number (a string: "100000") holds maxHoldOutputTokens; none
// at all holds defaultHoldOutputTokens; a limit is at most
// maxHoldOutputTokens.
func outputLimit(body []byte) int64 {
	var o outputFields
	if !o.read(body, false) {
		return maxHoldOutputTokens
	}
	limit := o.limit
	if limit < 0 {
		limit = defaultHoldOutputTokens
	}
	limit = min(limit, maxHoldOutputTokens)
	for _, m := range [...]int64{o.choices, o.candidates, o.prompts} {
		if m > 1 {
			if m > maxHoldOutputTokens/max(limit, 1) {
				return maxHoldOutputTokens
			}
			limit *= m
		}
	}
	return min(limit, maxHoldOutputTokens)
}

// outputFields are the members of a request body outputLimit reads: the
// largest output limit (-1: none) and its multipliers (0: none), or, for
// a member there but unreadable, math.MaxInt64.
type outputFields struct {
	limit                        int64
	choices, candidates, prompts int64
}

// read reads obj, a JSON object, into o (nested: generationConfig's
// members), and reports whether it was one.
func (o *outputFields) read(obj []byte, nested bool) bool {
	if !nested {
		o.limit = -1
	}
	l := jsonscan.New(obj)
	if !l.Lit("{") {
		return false
	}
	if l.Lit("}") {
		return l.End()
	}
	var name []byte
	for {
		raw, escaped, ok := l.Span()
		if !ok || !l.Lit(":") {
			return false
		}
		if name = raw; escaped {
			name = jsonscan.Unquote(name[:0:0], raw)
		}
		l.WS()
		at := l.Pos()
		if !l.Skip() {
			return false
		}
		o.member(string(name), obj[at:l.Pos()], nested)
		if l.Lit("}") {
			return l.End()
		}
		if !l.Lit(",") {
			return false
		}
	}
}

// member reads one member, key = value, of a body (nested: of its
// generationConfig).
func (o *outputFields) member(key string, value []byte, nested bool) {
	key = strings.ToLower(strings.ReplaceAll(key, "_", ""))
	switch {
	case key == "generationconfig" && !nested:
		o.read(value, true)
	case key == "maxtokens" || key == "maxcompletiontokens" || key == "maxoutputtokens" || key == "maxtokenstosample":
		o.limit = max(o.limit, count(value))
	case key == "n" || key == "bestof":
		o.choices = max(o.choices, count(value))
	case key == "candidatecount":
		o.candidates = max(o.candidates, count(value))
	case key == "prompt" && !nested && len(value) > 0 && value[0] == '[':
		o.prompts = max(o.prompts, prompts(value))
	}
}

// count is a JSON value read as a count: a non-negative number, rounded
// up; -1 for a negative one or null (which an API refuses or reads as
// unset); math.MaxInt64 for anything else.
func count(v []byte) int64 {
	if string(v) == "null" {
		return -1
	}
	f, err := strconv.ParseFloat(string(v), 64)
	switch {
	case err != nil || math.IsNaN(f):
		return math.MaxInt64
	case f < 0:
		return -1
	case f >= maxHoldOutputTokens:
		return maxHoldOutputTokens
	}
	return int64(math.Ceil(f))
}

// prompts is how many prompts a completions request's prompt array holds:
// its elements when they are strings or arrays (token lists), 1 when they
// are numbers (one token list).
func prompts(v []byte) int64 {
	l := jsonscan.New(v)
	n, tokens := int64(0), false
	if !l.Array(func() bool {
		n++
		tokens = tokens || l.Peek() != '"' && l.Peek() != '['
		return l.Skip()
	}) {
		return 1
	}
	if tokens {
		return 1
	}
	return n
}
