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
// prompt at a token a byte of its upstream body (no byte-level tokenizer
// counts more; bytes / 4, the tpm_limit's estimate, held a fourth of a
// prompt of one-letter words, each a token: 20 such requests at once
// were charged about twice their key's limit), plus the input the
// provider adds to it that can be bounded (hiddenPromptTokens: Anthropic's
// tool prompts), and its output limit
// (outputLimit; none for embeddings), rated as the ledger will with the
// prompt all uncached or all written to the cache
// and the output all reasoning or none, whichever costs more; the largest
// over the attempts, whose fallbacks may be priced higher. 0 when the
// gateway has no Rater; unratable when a rating fails.
func (s *Server) holdEstimate(k *usage.KeyState, attempts []prepared, endpoint string, now time.Time) int64 {
	if s.rates == nil {
		return 0
	}
	most := int64(0)
	for _, a := range attempts {
		prompt, output := int64(len(a.body))+hiddenPromptTokens(a.body, a.path), int64(0)
		if endpoint != "/v1/embeddings" {
			output = outputLimit(a.body, a.path)
		}
		for _, u := range [...]usage.Tokens{
			{PromptTokens: prompt, CompletionTokens: output},
			{PromptTokens: prompt, CacheWriteTokens: prompt, CompletionTokens: output, ReasoningTokens: output},
			{PromptTokens: prompt, CacheWriteTokens: prompt, CompletionTokens: output},
			{PromptTokens: prompt, CompletionTokens: output, ReasoningTokens: output},
		} {
			e := usage.Event{CustomerID: k.CustomerID, KeyID: k.KeyID, Model: a.model, Time: now,
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

// outputLimit is the most output tokens a request body, sent upstream at
// path, may be billed for, as the upstream's API reads it (outputAPI):
// the largest of the API's output limits (max_tokens and
// max_completion_tokens on chat, max_tokens on completions and Anthropic's
// messages, max_output_tokens on Responses, generationConfig's
// maxOutputTokens on Gemini), times its choices (n, best_of,
// candidateCount, a completions prompt's array of prompts). A name is
// read as its field when it is the field's, or when an upstream matching
// names without regard to case (as encoding/json does) would read it so
// ("MAX_TOKENS", "max_tokenſ"); escapes are decoded, as every parser
// does. A field of another API is not read (a decoy max_tokens on
// Responses). When no name is exactly the field's, a strict upstream may
// read no limit: the request holds at least defaultHoldOutputTokens. A
// limit or a count that is there but not a number ("100000") holds
// maxHoldOutputTokens, as does a body that is not a JSON object; a limit is
// at most maxHoldOutputTokens. Embeddings and token counts hold none.
func outputLimit(body []byte, path string) int64 {
	api := outputAPIOf(path)
	if api.none {
		return 0
	}
	o := outputFields{api: api, exact: -1, loose: -1}
	if !o.read(body, false, false) || o.unreadable {
		return maxHoldOutputTokens
	}
	limit := max(o.exact, o.loose)
	if o.exact < 0 || api.unknown {
		limit = max(limit, defaultHoldOutputTokens)
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

// statedOutputLimit is outputLimit of a body that states its output limit
// exactly under its API's name, and true; false when it states none (the
// upstream's own default bounds it then, which the gateway does not know),
// or its API is not one outputLimit knows, or a limit is not a number.
// An API without output (embeddings) states 0.
func statedOutputLimit(body []byte, path string) (int64, bool) {
	api := outputAPIOf(path)
	if api.none {
		return 0, true
	}
	o := outputFields{api: api, exact: -1, loose: -1}
	if api.unknown || !o.read(body, false, false) || o.unreadable || o.exact < 0 {
		return 0, false
	}
	return outputLimit(body, path), true
}

// outputAPI is what outputLimit reads in an API's request body: its
// output limits and choice counts (top-level names), Gemini's
// generationConfig (nested: its names are read inside it), a completions
// prompt array, or nothing at all (none).
type outputAPI struct {
	limits, choices []string
	nested          []string // the members the limits and choices are in (Gemini)
	prompts         bool
	none            bool
	unknown         bool // an API outputLimit does not know: which name it reads is unknown
}

// The APIs outputLimit knows, by the upstream path; an unknown one reads
// every name of them all, and holds at least defaultHoldOutputTokens.
var (
	chatOutput        = outputAPI{limits: []string{"max_tokens", "max_completion_tokens"}, choices: []string{"n"}}
	completionsOutput = outputAPI{limits: []string{"max_tokens"}, choices: []string{"n", "best_of"}, prompts: true}
	responsesOutput   = outputAPI{limits: []string{"max_output_tokens"}}
	messagesOutput    = outputAPI{limits: []string{"max_tokens"}}
	geminiOutput      = outputAPI{limits: []string{"maxOutputTokens", "max_output_tokens"},
		choices: []string{"candidateCount", "candidate_count"}, nested: []string{"generationConfig", "generation_config"}}
	anyOutput = outputAPI{limits: []string{"max_tokens", "max_completion_tokens", "max_output_tokens", "max_tokens_to_sample",
		"maxOutputTokens"}, choices: []string{"n", "best_of", "candidateCount", "candidate_count"}, prompts: true, unknown: true}
)

// outputAPIOf is the API of an upstream path ("/chat/completions",
// "/models/m:streamGenerateContent?alt=sse", …).
func outputAPIOf(path string) outputAPI {
	path, _, _ = strings.Cut(path, "?")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return chatOutput
	case strings.HasSuffix(path, "/completions"):
		return completionsOutput
	case strings.HasSuffix(path, "/responses"):
		return responsesOutput
	case strings.HasSuffix(path, "/messages"):
		return messagesOutput
	case strings.HasSuffix(path, "GenerateContent") || strings.HasSuffix(path, ":generateContent"):
		return geminiOutput
	case strings.HasSuffix(path, "/embeddings") || strings.Contains(path, "mbedContent") ||
		strings.HasSuffix(path, "ountTokens") || strings.HasSuffix(path, "/count_tokens"):
		return outputAPI{none: true}
	}
	return anyOutput
}

// outputFields is what outputLimit has read of a body: the largest limit
// under a name exactly the field's (exact) and under another an upstream
// may read as it (loose), -1 when none; the largest choice counts (0:
// none); and whether a limit or count was not a number.
type outputFields struct {
	api                          outputAPI
	exact, loose                 int64
	choices, candidates, prompts int64
	unreadable                   bool
}

// read reads obj, a JSON object, into o (nested: the API's nested object,
// whose names are all loose when its own name is: loose), and reports
// whether it was one.
func (o *outputFields) read(obj []byte, nested, loose bool) bool {
	l := jsonscan.New(obj)
	if !l.Lit("{") {
		return false
	}
	if l.Lit("}") {
		return l.End()
	}
	for {
		raw, escaped, ok := l.Span()
		if !ok || !l.Lit(":") {
			return false
		}
		name := string(raw)
		if escaped {
			name = string(jsonscan.Unquote(nil, raw))
		}
		l.WS()
		at := l.Pos()
		if !l.Skip() {
			return false
		}
		o.member(name, obj[at:l.Pos()], nested, loose)
		if l.Lit("}") {
			return l.End()
		}
		if !l.Lit(",") {
			return false
		}
	}
}

// member reads one member, name = value, of a body (nested: of the API's
// nested object; loose: one whose name was not exactly the API's).
func (o *outputFields) member(name string, value []byte, nested, loose bool) {
	if !nested && len(o.api.nested) > 0 {
		if exact, ok := matches(name, o.api.nested); ok {
			o.read(value, true, !exact)
		}
		return
	}
	if exact, ok := matches(name, o.api.limits); ok {
		v := count(value)
		switch {
		case v == math.MaxInt64:
			o.unreadable = true
		case exact && !loose:
			o.exact = max(o.exact, v)
		default:
			o.loose = max(o.loose, v)
		}
		return
	}
	if _, ok := matches(name, o.api.choices); ok {
		v := count(value)
		o.unreadable = o.unreadable || v == math.MaxInt64
		if len(o.api.nested) > 0 {
			o.candidates = max(o.candidates, v)
		} else {
			o.choices = max(o.choices, v)
		}
		return
	}
	if o.api.prompts && !nested && len(value) > 0 && value[0] == '[' && strings.EqualFold(name, "prompt") {
		o.prompts = max(o.prompts, prompts(value))
	}
}

// matches reports whether name is one of names, exactly (exact) or under
// Unicode case folding, as encoding/json matches a field's name.
func matches(name string, names []string) (exact, ok bool) {
	for _, n := range names {
		if name == n {
			return true, true
		}
	}
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return false, true
		}
	}
	return false, false
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
