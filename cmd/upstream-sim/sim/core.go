package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"unicode"
)

// Protocol is a provider wire protocol the simulator speaks.
type Protocol string

// The protocols, by the name /stats uses for them.
const (
	// OpenAI is Chat Completions: POST /v1/chat/completions.
	OpenAI Protocol = "openai"
	// Anthropic is the Messages API: POST /v1/messages.
	Anthropic Protocol = "anthropic"
	// Gemini is generateContent and streamGenerateContent?alt=sse.
	Gemini Protocol = "gemini"
)

// protocols lists every Protocol, in the order of counters.p.
var protocols = [...]Protocol{OpenAI, Anthropic, Gemini}

// Usage is the usage the simulator bills for one request, in tokens, whatever
// the protocol. As in OpenAI's usage object, PromptTokens includes
// CachedTokens and CompletionTokens includes ReasoningTokens. The package
// documentation says how each protocol reports it on the wire.
type Usage struct {
	// PromptTokens is the whole prompt, cached part included, in tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// CachedTokens is the part of the prompt read from the cache, in tokens.
	CachedTokens int64 `json:"cached_tokens"`
	// CompletionTokens is the whole output, reasoning included, in tokens.
	CompletionTokens int64 `json:"completion_tokens"`
	// ReasoningTokens is the reasoning (thinking, thoughts) part of the
	// output, in tokens.
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// TotalTokens is usage.total_tokens: prompt plus completion tokens.
func (u Usage) TotalTokens() int64 { return u.PromptTokens + u.CompletionTokens }

// spec is what the simulator takes from a request, whatever its protocol.
type spec struct {
	model        string
	stream       bool
	includeUsage bool // OpenAI stream_options.include_usage
	thoughts     bool // Gemini thinkingConfig.includeThoughts
	usage        Usage
	capped       bool              // the length came from a cap: finish "length", "max_tokens", "MAX_TOKENS"
	controls     map[string]string // sim_* controls from the body; headers win over them
	toolName     string            // OpenAI: the first tool's function name, for sim_tool_call
}

// codec is one protocol's side of the simulator: request parsing, error
// envelopes, the non-streamed response and the stream encoder. The rest
// (plan, faults, pacing, stats) is shared.
type codec interface {
	protocol() Protocol
	// parse decodes and validates a request. Its errors are client errors.
	parse(r *http.Request, body []byte) (*spec, error)
	// check rejects the fault modes the protocol cannot express.
	check(f fault) error
	// writeError writes the protocol's error envelope for a client error
	// (400, 404, 413) with message msg.
	writeError(w http.ResponseWriter, status int, msg string)
	// writeStatus writes the error the provider sends with status (sim_status).
	writeStatus(w http.ResponseWriter, status int)
	// writeResponse writes the non-streamed response of p.
	writeResponse(w http.ResponseWriter, p *plan)
	// encoder returns the stream encoder of p.
	encoder(p *plan) encoder
}

// newUsage applies the model profile to prompt and completion token counts.
func newUsage(model string, prompt, completion int64) Usage {
	u := Usage{PromptTokens: prompt, CompletionTokens: completion}
	cached, reasoning := profile(model)
	if cached {
		u.CachedTokens = prompt / 2
	}
	if reasoning {
		u.ReasoningTokens = completion / 2
	}
	return u
}

// profile reports which usage details a model reports, by case-insensitive
// substring: "cache" or "sim-pro" for cached tokens, "reason" or "sim-pro"
// for reasoning tokens.
func profile(model string) (cached, reasoning bool) {
	m := strings.ToLower(model)
	pro := strings.Contains(m, "sim-pro")
	return pro || strings.Contains(m, "cache"), pro || strings.Contains(m, "reason")
}

// countWords is len(strings.Fields(s)) without allocating.
func countWords(s string) int64 {
	var n int64
	inWord := false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			n++
		}
		inWord = !space
	}
	return n
}

// ResponseID returns the id the simulator gives the response to a request
// body in protocol p: the first 24 hex digits of the body's SHA-256, after
// "chatcmpl-" (OpenAI) or "msg_" (Anthropic); bare for Gemini's responseId.
func ResponseID(p Protocol, body []byte) string {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:12])
	switch p {
	case OpenAI:
		return "chatcmpl-" + h
	case Anthropic:
		return "msg_" + h
	}
	return h
}

// CompletionID returns the id the simulator gives the completion of a Chat
// Completions request body: ResponseID(OpenAI, body).
func CompletionID(body []byte) string { return ResponseID(OpenAI, body) }

// parseControlString parses "key=value;key=value" (Anthropic's
// metadata.user_id). Pairs whose key does not start with "sim_" and text
// without '=' are ignored, so an ordinary user id carries no controls.
func parseControlString(s string) map[string]string {
	var m map[string]string
	for pair := range strings.SplitSeq(s, ";") {
		k, v, ok := strings.Cut(pair, "=")
		if k = strings.TrimSpace(k); !ok || !strings.HasPrefix(k, "sim_") {
			continue
		}
		if m == nil {
			m = make(map[string]string)
		}
		m[k] = strings.TrimSpace(v)
	}
	return m
}
