package anthropic

import (
	"encoding/json"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// The Messages API's response shapes, as far as the gateway reads them
// (Messages and Streaming Messages in Anthropic's API reference). Fields the
// gateway does not need are not decoded, so their shapes may change freely.

// wireEvent is the data of one streamed event: message_start,
// content_block_start, content_block_delta, content_block_stop,
// message_delta, message_stop, ping or error.
type wireEvent struct {
	Type         string       `json:"type"`
	Message      *wireMessage `json:"message"`
	Index        int64        `json:"index"`
	ContentBlock wireBlock    `json:"content_block"`
	Delta        wireDelta    `json:"delta"`
	Usage        *wireUsage   `json:"usage"`
	Error        *wireError   `json:"error"`
}

// errorInfo returns the type and message of an error event; e may be nil
// (an error event whose data could not be read).
func (e *wireEvent) errorInfo() (typ, msg string) {
	if e == nil {
		return (*wireError)(nil).info()
	}
	return e.Error.info()
}

// wireMessage is a Message object: a whole non-streamed response, or the
// message of message_start (with empty content). An error response has
// type "error" and Error set.
type wireMessage struct {
	Type       string      `json:"type"`
	ID         string      `json:"id"`
	Model      string      `json:"model"`
	Content    []wireBlock `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      *wireUsage  `json:"usage"`
	Error      *wireError  `json:"error"`
}

// wireBlock is a content block: text, thinking, redacted_thinking,
// tool_use, server_tool_use, a server tool's result, compaction.
type wireBlock struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	Input    json.RawMessage `json:"input"`
}

// wireDelta is the delta of content_block_delta (text_delta,
// thinking_delta, input_json_delta, signature_delta, citations_delta,
// compaction_delta) or of message_delta (stop_reason).
type wireDelta struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	Thinking    string          `json:"thinking"`
	PartialJSON string          `json:"partial_json"`
	Content     json.RawMessage `json:"content"`
	StopReason  string          `json:"stop_reason"`
}

// output returns the text a content delta adds to the model's output: the
// text, the thinking, the tool input JSON fragment, or the compaction
// summary (billed output of the compaction iteration). Signatures and
// citations are not output text.
// addTo records the delta's text in r: thinking as reasoning shown.
func (d *wireDelta) addTo(r *tap.Report) {
	if d.Type == "thinking_delta" {
		r.AddReasoning(d.Thinking)
		return
	}
	r.AddOutput(d.output())
}

func (d *wireDelta) output() string {
	switch d.Type {
	case "text_delta":
		return d.Text
	case "thinking_delta":
		return d.Thinking
	case "input_json_delta":
		return d.PartialJSON
	case "compaction_delta":
		var s string
		_ = json.Unmarshal(d.Content, &s)
		return s
	}
	return ""
}

// wireUsage is the usage object of message_start, message_delta and a
// whole response. A nil field was not sent: the earlier figure stands.
type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
	ServerToolUse *struct {
		WebSearchRequests *int64 `json:"web_search_requests"`
	} `json:"server_tool_use"`
	Iterations []wireIteration `json:"iterations"`
}

// wireIteration is one billed sampling iteration of usage.iterations[]
// (server-side compaction): type "compaction" or "message".
type wireIteration struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// wireError is the error object of an error event or error response, such
// as {"type":"overloaded_error","message":"Overloaded"}.
type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// info returns the error's type and message, with stand-ins for what is
// missing; e may be nil.
func (e *wireError) info() (typ, msg string) {
	typ, msg = "api_error", "upstream sent an error event"
	if e != nil {
		if e.Type != "" {
			typ = e.Type
		}
		if e.Message != "" {
			msg = e.Message
		}
	}
	return typ, msg
}
