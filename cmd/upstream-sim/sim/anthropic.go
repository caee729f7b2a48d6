package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// messagesRequest holds the fields of an Anthropic Messages request the
// simulator reads.
type messagesRequest struct {
	Model     *string         `json:"model"`
	MaxTokens *int64          `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []chatMessage   `json:"messages"`
	Stream    bool            `json:"stream"`
	Metadata  *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
}

// parseMessages decodes, validates and applies the rules to a Messages body.
// Its errors are client errors.
func parseMessages(body []byte) (*spec, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return nil, errors.New("model: Field required")
	case req.MaxTokens == nil:
		return nil, errors.New("max_tokens: Field required")
	case *req.MaxTokens < 1 || *req.MaxTokens > MaxCompletionTokens:
		return nil, fmt.Errorf("max_tokens: must be between 1 and %d", MaxCompletionTokens)
	case len(req.Messages) == 0:
		return nil, errors.New("messages: at least one message is required")
	}
	prompt := int64(3)
	if sys := bytes.TrimSpace(req.System); len(sys) > 0 && !bytes.Equal(sys, []byte("null")) {
		words, err := contentWords(sys)
		if err != nil {
			return nil, fmt.Errorf("system: %w", err)
		}
		prompt += 4 + words
	}
	for i, m := range req.Messages {
		words, err := contentWords(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %w", i, err)
		}
		prompt += 4 + words
	}
	sp := &spec{model: *req.Model, stream: req.Stream}
	if req.Metadata != nil && req.Metadata.UserID != nil {
		sp.controls = parseControlString(*req.Metadata.UserID)
	}
	// max_tokens is a ceiling every client sets: the model wants to write
	// DefaultCompletionTokens and stops early only when the ceiling is lower.
	completion := int64(DefaultCompletionTokens)
	if *req.MaxTokens < completion {
		completion, sp.capped = *req.MaxTokens, true
	}
	sp.usage = newUsage(sp.model, prompt, completion)
	return sp, nil
}

// ExpectedAnthropicUsage returns the full usage, in tokens, the simulator
// bills for a successful Messages request with this body (controls do not
// change usage). On the wire, input_tokens is PromptTokens - CachedTokens,
// cache_read_input_tokens is CachedTokens and output_tokens is
// CompletionTokens, thinking included (ReasoningTokens is the number of
// thinking words, not reported apart). It returns an error when the body is
// a request the simulator rejects with 400.
func ExpectedAnthropicUsage(body []byte) (Usage, error) {
	sp, err := parseMessages(body)
	if err != nil {
		return Usage{}, err
	}
	return sp.usage, nil
}

// anthropicCodec is the Messages protocol.
type anthropicCodec struct{}

func (anthropicCodec) protocol() Protocol { return Anthropic }

func (anthropicCodec) parse(_ *http.Request, body []byte) (*spec, error) { return parseMessages(body) }

// check rejects cumulative_usage: Anthropic reports usage on message_start
// and message_delta only. (usage_in_finish is what it does anyway.)
func (anthropicCodec) check(f fault) error {
	if f.cumulative {
		return errors.New("sim_fault: cumulative_usage does not apply to the Messages API")
	}
	return nil
}

func (anthropicCodec) encoder(p *plan) encoder { return &anthropicEncoder{p: p} }

func (anthropicCodec) writeResponse(w http.ResponseWriter, p *plan) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", p.id)
	_, _ = w.Write(appendMessage(make([]byte, 0, 512+4*p.usage.CompletionTokens), p))
}

func (anthropicCodec) writeError(w http.ResponseWriter, status int, msg string) {
	writeAnthropicError(w, status, anthropicErrorType(status), msg)
}

func (anthropicCodec) writeStatus(w http.ResponseWriter, status int) {
	setRetryAfter(w, status)
	writeAnthropicError(w, status, anthropicErrorType(status), simulatedMessage(status))
}

// anthropicErrorType is the error.type Anthropic sends with status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// writeAnthropicError writes Anthropic's error envelope.
func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	writeJSON(w, status, struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, msg}})
}
