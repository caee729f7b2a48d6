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
// Counts are read leniently and never fail the decoding (see tap.Count). A
// usage, or an object in it, of the wrong type does (encoding/json skips
// it): see recheck, which marks what could not be read.
type wireUsage struct {
	InputTokens              *tap.Count      `json:"input_tokens"`
	CacheCreationInputTokens *tap.Count      `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *tap.Count      `json:"cache_read_input_tokens"`
	OutputTokens             *tap.Count      `json:"output_tokens"`
	OutputTokensDetails      *outputDetails  `json:"output_tokens_details"`
	ServerToolUse            *serverToolUse  `json:"server_tool_use"`
	Iterations               []wireIteration `json:"iterations"`
	garbled                  bool            // not an object: nothing in it could be read
}

// outputDetails is usage.output_tokens_details.
type outputDetails struct {
	ThinkingTokens *tap.Count `json:"thinking_tokens"`
}

// serverToolUse is usage.server_tool_use.
type serverToolUse struct {
	WebSearchRequests *tap.Count `json:"web_search_requests"`
}

// wireIteration is one billed sampling iteration of usage.iterations[]
// (server-side compaction): type "compaction" or "message". A count that
// is absent or null is 0.
type wireIteration struct {
	InputTokens              tap.Count `json:"input_tokens"`
	CacheCreationInputTokens tap.Count `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     tap.Count `json:"cache_read_input_tokens"`
	OutputTokens             tap.Count `json:"output_tokens"`
}

// recheckUsage is called when decoding the event or response whose usage
// is raw met a value of the wrong type somewhere (rarely: it decodes raw
// again). It marks in u, which encoding/json decoded from raw, what was
// skipped: a usage that is not an object is garbled, an
// output_tokens_details or server_tool_use that is not an object leaves
// its count unreadable, and so does an iterations that is not an array of
// objects. u may be nil (none decoded, or none sent); recheckUsage returns
// the usage to use.
func recheckUsage(raw json.RawMessage, u *wireUsage) *wireUsage {
	switch kindOf(raw) {
	case 0, 'n':
		return u
	case '{':
	default:
		return &wireUsage{garbled: true}
	}
	if u == nil {
		u = new(wireUsage)
	}
	var in struct {
		OutputTokensDetails json.RawMessage `json:"output_tokens_details"`
		ServerToolUse       json.RawMessage `json:"server_tool_use"`
		Iterations          json.RawMessage `json:"iterations"`
	}
	_ = json.Unmarshal(raw, &in)
	if k := kindOf(in.OutputTokensDetails); k != 0 && k != 'n' && k != '{' {
		u.OutputTokensDetails = &outputDetails{ThinkingTokens: unreadable()}
	}
	if k := kindOf(in.ServerToolUse); k != 0 && k != 'n' && k != '{' {
		u.ServerToolUse = &serverToolUse{WebSearchRequests: unreadable()}
	}
	if k := kindOf(in.Iterations); k != 0 && k != 'n' {
		var elems []json.RawMessage
		ok := k == '[' && json.Unmarshal(in.Iterations, &elems) == nil
		for _, e := range elems {
			ok = ok && (kindOf(e) == '{' || kindOf(e) == 'n')
		}
		if !ok {
			u.Iterations = []wireIteration{{InputTokens: -1}}
		}
	}
	return u
}

// unreadable returns a new unreadable count.
func unreadable() *tap.Count {
	c := tap.Unreadable
	return &c
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
