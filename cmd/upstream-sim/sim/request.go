package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// DefaultCompletionTokens is the completion length, in tokens, of a request
// that sets neither max_completion_tokens nor max_tokens.
const DefaultCompletionTokens = 16

// MaxCompletionTokens is the largest token cap, in tokens, the simulator
// accepts in max_completion_tokens or max_tokens; larger caps get a 400.
const MaxCompletionTokens = 1 << 20

// Usage is the usage the simulator reports for one request, in tokens. As in
// OpenAI's usage object, PromptTokens includes CachedTokens and
// CompletionTokens includes ReasoningTokens.
type Usage struct {
	// PromptTokens is usage.prompt_tokens, in tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// CachedTokens is usage.prompt_tokens_details.cached_tokens, in tokens.
	CachedTokens int64 `json:"cached_tokens"`
	// CompletionTokens is usage.completion_tokens, in tokens.
	CompletionTokens int64 `json:"completion_tokens"`
	// ReasoningTokens is usage.completion_tokens_details.reasoning_tokens, in tokens.
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// TotalTokens is usage.total_tokens: prompt plus completion tokens.
func (u Usage) TotalTokens() int64 { return u.PromptTokens + u.CompletionTokens }

// chatRequest holds the fields of a Chat Completions request the simulator reads.
type chatRequest struct {
	Model               *string           `json:"model"`
	Messages            []chatMessage     `json:"messages"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Metadata            map[string]string `json:"metadata"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseRequest decodes and validates body. Its errors are client errors.
func parseRequest(body []byte) (*chatRequest, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	if req.Model == nil || *req.Model == "" {
		return nil, errors.New("you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages must be a non-empty array")
	}
	for name, v := range map[string]*int64{"max_tokens": req.MaxTokens, "max_completion_tokens": req.MaxCompletionTokens} {
		if v != nil && (*v < 1 || *v > MaxCompletionTokens) {
			return nil, fmt.Errorf("%s must be between 1 and %d", name, MaxCompletionTokens)
		}
	}
	return &req, nil
}

// promptTokens applies the prompt rule to the parsed messages.
func (r *chatRequest) promptTokens() (int64, error) {
	n := int64(3)
	for i, m := range r.Messages {
		words, err := contentWords(m.Content)
		if err != nil {
			return 0, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		n += 4 + words
	}
	return n, nil
}

// usage applies the completion rule and the model profile. capped reports
// whether the length came from the request (finish_reason "length").
func (r *chatRequest) usage() (u Usage, capped bool, err error) {
	if u.PromptTokens, err = r.promptTokens(); err != nil {
		return Usage{}, false, err
	}
	u.CompletionTokens = DefaultCompletionTokens
	switch {
	case r.MaxCompletionTokens != nil:
		u.CompletionTokens, capped = *r.MaxCompletionTokens, true
	case r.MaxTokens != nil:
		u.CompletionTokens, capped = *r.MaxTokens, true
	}
	cached, reasoning := profile(*r.Model)
	if cached {
		u.CachedTokens = u.PromptTokens / 2
	}
	if reasoning {
		u.ReasoningTokens = u.CompletionTokens / 2
	}
	return u, capped, nil
}

// profile reports which usage details a model reports, by case-insensitive
// substring: "cache" or "sim-pro" for cached tokens, "reason" or "sim-pro"
// for reasoning tokens.
func profile(model string) (cached, reasoning bool) {
	m := strings.ToLower(model)
	pro := strings.Contains(m, "sim-pro")
	return pro || strings.Contains(m, "cache"), pro || strings.Contains(m, "reason")
}

// contentWords counts the words of a message content: a string, an array of
// content parts (only {"type":"text"} parts count), or null/absent (0).
func contentWords(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return countWords(s), nil
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return 0, err
		}
		var n int64
		for _, p := range parts {
			if p.Type == "text" {
				n += countWords(p.Text)
			}
		}
		return n, nil
	}
	return 0, errors.New("must be a string or an array of content parts")
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

// PromptTokens returns the prompt_tokens the simulator reports for a Chat
// Completions request body, in tokens: 3 plus, per message, 4 plus the
// whitespace-separated words of its text content. It returns an error when
// the body is a request the simulator rejects with 400.
func PromptTokens(body []byte) (int64, error) {
	req, err := parseRequest(body)
	if err != nil {
		return 0, err
	}
	return req.promptTokens()
}

// ExpectedUsage returns the full usage, in tokens, the simulator reports for a
// successful Chat Completions request with this body (controls do not change
// usage). It returns an error when the body is a request the simulator
// rejects with 400.
func ExpectedUsage(body []byte) (Usage, error) {
	req, err := parseRequest(body)
	if err != nil {
		return Usage{}, err
	}
	u, _, err := req.usage()
	return u, err
}

// CompletionID returns the id the simulator gives the completion of a request
// body: "chatcmpl-" followed by the first 24 hex digits of its SHA-256.
func CompletionID(body []byte) string {
	sum := sha256.Sum256(body)
	return "chatcmpl-" + hex.EncodeToString(sum[:12])
}
