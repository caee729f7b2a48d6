// Package openai reads usage from OpenAI Chat Completions responses, streamed
// (chat.completion.chunk) and not, as OpenAI and OpenAI-compatible upstreams
// send them, and normalizes it into usage.Tokens.
//
// Source: OpenAI's API reference, "The chat completion chunk object" and
// "The chat completion object" (fields usage.prompt_tokens,
// usage.prompt_tokens_details.cached_tokens, usage.completion_tokens,
// usage.completion_tokens_details.reasoning_tokens).
package openai

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Usage is OpenAI's usage object. Fields some compatible upstreams add
// (cost, is_byok, cost_details) are ignored.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// Meter converts u into normalized usage. OpenAI's prompt_tokens already
// includes cached tokens, and completion_tokens includes reasoning tokens,
// so the figures carry over as they are, but for a report whose total
// counts the reasoning apart from completion_tokens (ReasoningOutside).
func (u *Usage) Meter() usage.Tokens {
	m := usage.Tokens{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		m.CachedTokens, m.CacheWriteTokens = d.CachedTokens, d.CacheWriteTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		m.ReasoningTokens = d.ReasoningTokens
	}
	m.CompletionTokens += reasoningOutside(m, u.TotalTokens)
	return m
}

// ReasoningOutside reports whether u counts its reasoning tokens apart
// from completion_tokens (see reasoningOutside): Meter then bills them
// added to it, and u, as the upstream wrote it, is not what was billed.
func (u *Usage) ReasoningOutside() bool { return u.Meter().CompletionTokens != u.CompletionTokens }

// reasoningOutside returns the reasoning tokens that a usage report (u as
// read, total its total_tokens) counts apart from its completion_tokens,
// or 0. OpenAI counts reasoning within completion_tokens, so that
// total_tokens = prompt_tokens + completion_tokens. xAI counts it apart
// ("reasoning tokens are separated from the completion_tokens": xAI's and
// Vertex AI's docs on Grok reasoning), and its total_tokens = prompt_tokens
// + completion_tokens + reasoning_tokens: billed as completion_tokens
// alone, half a Grok request's output went unbilled (a review). A report
// whose total says so has its reasoning added to its completion; one whose
// total says nothing (absent, 0, or another sum) is read as OpenAI's.
func reasoningOutside(u usage.Tokens, total int64) int64 {
	r := u.ReasoningTokens
	if r <= 0 || total <= 0 || u.PromptTokens < 0 || u.CompletionTokens < 0 ||
		u.PromptTokens > usage.MaxCount || u.CompletionTokens > usage.MaxCount || r > usage.MaxCount {
		return 0
	}
	if total != u.PromptTokens+u.CompletionTokens+r {
		return 0
	}
	return r
}

// Chunk is what the gateway reads from one chat.completion.chunk (or from a
// whole chat.completion): everything else in it passes through untouched.
type Chunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Delta struct {
			Content          string     `json:"content"`
			ReasoningContent string     `json:"reasoning_content"`
			Reasoning        string     `json:"reasoning"`
			Refusal          string     `json:"refusal"`
			FunctionCall     *function  `json:"function_call"`
			ToolCalls        []toolCall `json:"tool_calls"`
		} `json:"delta"`
		Message struct {
			Content          string     `json:"content"`
			ReasoningContent string     `json:"reasoning_content"`
			Reasoning        string     `json:"reasoning"`
			Refusal          string     `json:"refusal"`
			FunctionCall     *function  `json:"function_call"`
			ToolCalls        []toolCall `json:"tool_calls"`
		} `json:"message"`
		// Text is a legacy completion's (POST /v1/completions) text.
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	// Usage is nil when the chunk carries none (absent or null).
	Usage *Usage `json:"usage"`
	// Error is set on an error frame: `data: {"error": {...}}`.
	Error json.RawMessage `json:"error"`
	// UnreadableUsage is set by ParseChunkLenient on a chunk whose usage
	// object it could not read (Usage is then nil).
	UnreadableUsage bool `json:"-"`
	// AmbiguousUsage is set on a chunk with more than one member that
	// encoding/json reads as its usage ("usage" and "Usage", or "usage"
	// twice): Usage is then the member spelled exactly "usage" (its last),
	// or, with none, encoding/json's merge of the others. Decoders differ
	// on such a chunk (JavaScript's and Python's read the last exact key,
	// Go's merges them all), so the gateway must not pass its usage on as
	// it is: it strips every such member and writes the usage it billed.
	AmbiguousUsage bool `json:"-"`
	// shadow is the whole chunk when one of its output fields is spelled
	// both exactly and otherwise (chatShadowed): ChatTap.Chunk counts it
	// as output, as the text the decode read may not be what a client
	// reads.
	shadow []byte
}

// chatShadowed reports whether data, a chunk or a whole completion, holds
// on the path to its output (choices, a choice's text, delta and message,
// their content, reasoning, refusal, function call and tool calls) a
// member spelled both exactly and otherwise (tap.AnyShadowed).
func chatShadowed(data []byte) bool {
	fn := func(f []byte) bool { return tap.AnyShadowed(f, "name", nil) || tap.AnyShadowed(f, "arguments", nil) }
	custom := func(c []byte) bool { return tap.AnyShadowed(c, "name", nil) || tap.AnyShadowed(c, "input", nil) }
	msg := func(m []byte) bool {
		for _, f := range [...]string{"content", "reasoning_content", "reasoning", "refusal"} {
			if tap.AnyShadowed(m, f, nil) {
				return true
			}
		}
		return tap.AnyShadowed(m, "function_call", fn) || tap.AnyShadowed(m, "tool_calls", func(tc []byte) bool {
			return tap.AnyShadowed(tc, "function", fn) || tap.AnyShadowed(tc, "custom", custom)
		})
	}
	return tap.AnyShadowed(data, "choices", func(c []byte) bool {
		return tap.AnyShadowed(c, "text", nil) || tap.AnyShadowed(c, "delta", msg) || tap.AnyShadowed(c, "message", msg)
	})
}

// function is a tool call's function, or the deprecated "function_call"
// of a delta or message (the answer to a request's "functions"): the
// model's output, like content.
type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolCall is one of a delta's or message's tool calls: a function's, or
// a custom tool's (OpenAI's "custom" tools, whose call carries a free-form
// "input" string where a function's carries JSON "arguments").
type toolCall struct {
	Function function    `json:"function"`
	Custom   *customCall `json:"custom"`
}

// customCall is a custom tool's call: its name and input, the model's
// output.
type customCall struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

// ParseChunk decodes the fields the gateway needs from a chunk's JSON. It
// returns an error for input that is not a JSON object, and ErrTooComplex
// for one of more choices or tool calls than it decodes.
func ParseChunk(data []byte) (*Chunk, error) {
	if tooComplex(data) {
		return nil, ErrTooComplex
	}
	c := new(Chunk)
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	if len(c.Error) > 0 && bytes.Equal(c.Error, []byte("null")) {
		c.Error = nil
	}
	// Two keys one in case (jsonscan.FoldedKey's quick scan, no decode)
	// are needed for an output field to be shadowed.
	if _, folded, _ := jsonscan.FoldedKey(data); folded && c.Error == nil && chatShadowed(data) {
		c.shadow = data
	}
	// Only a report read can be read differently: a chunk with none (the
	// most that come here) is not scanned again.
	if c.Usage != nil {
		if _, bad, _ := jsonscan.AmbiguousKey(data, "usage"); bad {
			c.AmbiguousUsage = true
			if raw, ok, _ := jsonscan.Member(data, "usage"); ok {
				var u *Usage
				if err := json.Unmarshal(raw, &u); err != nil {
					return nil, err // as a whole chunk's error: the caller reads it leniently
				}
				c.Usage = u
			}
		} else if raw, ok, _ := jsonscan.Member(data, "usage"); ok && ambiguousCounts(raw) {
			c.AmbiguousUsage = true
		}
	}
	return c, nil
}

// ambiguousCounts reports a usage object (raw) with a count, or a details
// object, that encoding/json reads from a member not spelled exactly once
// (another case, a Unicode fold such as U+212A KELVIN SIGN for 'k', an
// escape, a repeat), where JavaScript's and Python's decoders read the
// member spelled exactly: "prompt_tokens":1000000 beside "PROMPT_TOKENS":10
// was billed 10 and relayed as it came, the client reading 1,000,000 (a
// review). Such a usage is billed as encoding/json reads it, and the
// client is sent the billed usage (Chunk.AmbiguousUsage).
func ambiguousCounts(raw []byte) bool {
	if _, bad, _ := jsonscan.AmbiguousKey(raw, "prompt_tokens", "completion_tokens", "total_tokens",
		"prompt_tokens_details", "completion_tokens_details"); bad {
		return true
	}
	for _, d := range [...]struct {
		name string
		keys []string
	}{{"prompt_tokens_details", []string{"cached_tokens", "cache_write_tokens"}}, {"completion_tokens_details", []string{"reasoning_tokens"}}} {
		if sub, ok, _ := jsonscan.Member(raw, d.name); ok {
			if _, bad, _ := jsonscan.AmbiguousKey(sub, d.keys...); bad {
				return true
			}
		}
	}
	return false
}

// FinishReason returns the first choice's finish reason, or "".
func (c *Chunk) FinishReason() string {
	for _, ch := range c.Choices {
		if ch.FinishReason != "" {
			return ch.FinishReason
		}
	}
	return ""
}

// UsageOnly reports whether the chunk exists only to carry usage: it has
// usage and no choices, as OpenAI's include_usage chunk does, and no
// error. An empty choices array alone does not make a usage chunk (Azure
// sends one first with prompt_filter_results), and a mid-stream error
// frame that carries the usage so far (OpenRouter's) is an error.
func (c *Chunk) UsageOnly() bool { return c.Usage != nil && len(c.Choices) == 0 && c.Error == nil }

// usageJSON is OpenAI's usage object as the gateway writes it.
type usageJSON struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// AppendUsage appends u as OpenAI's usage object (JSON) to dst:
// prompt_tokens, completion_tokens, total_tokens,
// prompt_tokens_details.cached_tokens (and cache_write_tokens when not
// zero), completion_tokens_details.reasoning_tokens.
func AppendUsage(dst []byte, u usage.Tokens) []byte {
	j := usageJSON{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total()}
	j.PromptTokensDetails.CachedTokens = u.CachedTokens
	j.PromptTokensDetails.CacheWriteTokens = u.CacheWriteTokens
	j.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	b, _ := json.Marshal(j)
	return append(dst, b...)
}

// AppendUsageChunk appends OpenAI's include_usage chunk, with "choices":[]
// and the usage, to dst. object is the stream's chunk object:
// "chat.completion.chunk", or "text_completion" on the legacy completions
// endpoint, whose chunks are that.
func AppendUsageChunk(dst []byte, object, id, model string, created int64, u usage.Tokens) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, id)
	dst = append(dst, `,"object":`...)
	dst = AppendString(dst, object)
	dst = append(dst, `,"created":`...)
	dst = strconv.AppendInt(dst, created, 10)
	dst = append(dst, `,"model":`...)
	dst = AppendString(dst, model)
	dst = append(dst, `,"choices":[],"usage":`...)
	dst = AppendUsage(dst, u)
	return append(dst, '}')
}

// ToolCall is a tool call as a chat.completion message carries it
// (choices[].message.tool_calls[]): translations from other providers
// build these.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}
