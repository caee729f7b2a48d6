package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// DefaultCompletionTokens is the completion length, in tokens, of a request
// that sets no token cap (OpenAI, Gemini), and the most the simulated model
// ever wants to write for Anthropic, whose max_tokens is required.
const DefaultCompletionTokens = 16

// MaxCompletionTokens is the largest token cap, in tokens, the simulator
// accepts (max_completion_tokens, max_tokens, maxOutputTokens); larger caps
// get a 400.
const MaxCompletionTokens = 1 << 20

// chatRequest holds the fields of a Chat Completions request the simulator reads.
type chatRequest struct {
	Model               *string           `json:"model"`
	Messages            []chatMessage     `json:"messages"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Metadata            map[string]string `json:"metadata"`
	Tools               []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Content json.RawMessage `json:"content"`
}

// contentPart is a content part or block: OpenAI's and Anthropic's text
// parts are both {"type":"text","text":...}.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseChat decodes, validates and applies the rules to a Chat Completions
// body. Its errors are client errors.
func parseChat(body []byte) (*spec, error) {
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
	prompt := int64(3)
	for i, m := range req.Messages {
		words, err := contentWords(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		prompt += 4 + words
	}
	sp := &spec{
		model:        *req.Model,
		stream:       req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		controls:     req.Metadata,
	}
	if len(req.Tools) > 0 {
		sp.toolName = req.Tools[0].Function.Name
	}
	completion := int64(DefaultCompletionTokens)
	switch {
	case req.MaxCompletionTokens != nil:
		completion, sp.capped = *req.MaxCompletionTokens, true
	case req.MaxTokens != nil:
		completion, sp.capped = *req.MaxTokens, true
	}
	sp.usage = newUsage(sp.model, prompt, completion)
	return sp, nil
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

// PromptTokens returns the prompt_tokens the simulator reports for a Chat
// Completions request body, in tokens: 3 plus, per message, 4 plus the
// whitespace-separated words of its text content. It returns an error when
// the body is a request the simulator rejects with 400.
func PromptTokens(body []byte) (int64, error) {
	sp, err := parseChat(body)
	if err != nil {
		return 0, err
	}
	return sp.usage.PromptTokens, nil
}

// ExpectedUsage returns the full usage, in tokens, the simulator reports for a
// successful Chat Completions request with this body (controls do not change
// usage). It returns an error when the body is a request the simulator
// rejects with 400.
func ExpectedUsage(body []byte) (Usage, error) {
	sp, err := parseChat(body)
	if err != nil {
		return Usage{}, err
	}
	return sp.usage, nil
}

// openaiCodec is the Chat Completions protocol.
type openaiCodec struct{}

func (openaiCodec) protocol() Protocol { return OpenAI }

func (openaiCodec) parse(_ *http.Request, body []byte) (*spec, error) { return parseChat(body) }

func (openaiCodec) check(fault) error { return nil }

func (openaiCodec) encoder(p *plan) encoder {
	return &openaiEncoder{p: p, prefix: appendChunkPrefix(make([]byte, 0, 192), p)}
}

func (openaiCodec) writeResponse(w http.ResponseWriter, p *plan) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", p.id)
	_, _ = w.Write(appendCompletion(make([]byte, 0, 512+4*p.contentTokens), p))
}

func (openaiCodec) writeError(w http.ResponseWriter, status int, msg string) {
	writeOpenAIError(w, status, "invalid_request_error", "", msg)
}

// writeStatus writes the error envelope OpenAI sends with status.
func (openaiCodec) writeStatus(w http.ResponseWriter, status int) {
	typ, code := "invalid_request_error", ""
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusNotFound:
		code = "model_not_found"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	setRetryAfter(w, status)
	writeOpenAIError(w, status, typ, code, simulatedMessage(status))
}

// writeOpenAIError writes an OpenAI error envelope; an empty code is null.
func writeOpenAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c *string
	if code != "" {
		c = &code
	}
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	writeJSON(w, status, map[string]body{"error": {Message: msg, Type: typ, Code: c}})
}

// setRetryAfter sets Retry-After: 1 on a 429 or 503, as providers do,
// unless a deployment's knob set it already.
func setRetryAfter(w http.ResponseWriter, status int) {
	if w.Header().Get("Retry-After") != "" {
		return
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
}

// simulatedMessage is the error message of a sim_status response.
func simulatedMessage(status int) string {
	text := http.StatusText(status)
	if status == 529 {
		text = "Overloaded" // Anthropic's own status
	}
	return strings.TrimSpace("simulated error: " + strconv.Itoa(status) + " " + text)
}
