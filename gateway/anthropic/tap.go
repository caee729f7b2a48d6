// Package anthropic speaks Anthropic's Messages API (POST /v1/messages): it
// taps usage from Messages responses, streamed and not, for the native
// pass-through endpoint, and translates OpenAI chat completion requests and
// responses to and from Messages so that Claude models serve
// /v1/chat/completions.
//
// Sources, all from Anthropic's API reference and guides:
//   - Messages: https://docs.anthropic.com/en/api/messages
//   - Streaming Messages: https://docs.anthropic.com/en/docs/build-with-claude/streaming
//   - Prompt caching: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
//   - Extended thinking: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
//   - Server tools (web search): https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool
//   - Compaction: https://platform.claude.com/docs/en/build-with-claude/compaction
//   - Stop reasons: https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons
//   - Errors: https://docs.anthropic.com/en/api/errors
//   - Versions: https://docs.anthropic.com/en/api/versioning
//   - Tool use: https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
//   - Vision: https://docs.anthropic.com/en/docs/build-with-claude/vision
package anthropic

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Tap reads usage from one Anthropic Messages stream, as POST /v1/messages
// with "stream": true sends it, event by event (see Event). The zero value
// is ready; a Tap serves one stream and is not safe for concurrent use.
type Tap struct {
	top   counts // the latest figure of every top-level usage field
	iter  counts // the sum over usage.iterations[], when one was sent
	hasIt bool
	ev    wireEvent // the event being decoded, reused
	buf   []byte    // fastDelta's scratch space
}

// counts are Anthropic's raw usage figures, in tokens (webSearch counts
// requests). input excludes cache reads and writes.
type counts struct {
	input, cacheWrite, cacheRead, output, thinking, webSearch int64
}

// Event taps one upstream SSE event into r (it keeps none of ev's bytes):
//
//   - message_start: message.usage opens the count (Reported, not Final);
//     message.model becomes r.ServedModel.
//   - message_delta: usage is cumulative, so each field it carries replaces
//     the earlier figure and fields it omits keep theirs (older streams
//     send only output_tokens); it sets Final (a message_delta without
//     usage, which Anthropic never sends, does not). delta.stop_reason becomes
//     r.FinishReason (see finishReason).
//   - error (the SSE event type or the data's "type"): r.Error is set, and
//     r.FinishReason becomes "error" unless a stop reason arrived. It may
//     come before any message_start.
//   - text, thinking, tool input JSON and tool names go to r.AddOutput for
//     estimation; signatures, citations and error text do not.
//
// ping, unknown events and data that is not valid JSON of the expected
// shape are ignored; no input makes Event panic.
func (t *Tap) Event(ev *sse.Event, r *tap.Report) { t.observe(ev, r) }

// observe taps ev into r and returns the decoded event (nil when there is
// none) and whether ev is an upstream error. The event is valid until the
// next call.
func (t *Tap) observe(ev *sse.Event, r *tap.Report) (*wireEvent, bool) {
	isErr := string(ev.Type) == "error"
	if !ev.HasData && !isErr {
		return nil, false
	}
	if !isErr {
		var fast bool
		if t.buf, fast = fastDelta(ev.Data, &t.ev, t.buf); fast {
			t.ev.Delta.addTo(r)
			return &t.ev, false
		}
	}
	t.ev = wireEvent{}
	e := &t.ev
	if json.Unmarshal(ev.Data, e) != nil {
		// Malformed or of an unexpected shape: skipped, unless it says it is
		// an error.
		var head struct{ Type string }
		isErr = isErr || json.Unmarshal(ev.Data, &head) == nil && head.Type == "error"
		e = nil
	} else if e.Type == "error" {
		isErr = true
	}
	if isErr {
		typ, msg := e.errorInfo()
		setError(r, typ, msg)
		return e, true
	}
	if e == nil {
		return nil, false
	}
	switch e.Type {
	case "message_start":
		if m := e.Message; m != nil {
			if m.Model != "" {
				r.ServedModel = m.Model
			}
			if m.Usage != nil {
				t.merge(m.Usage, r)
				r.SetUsage(r.Usage)
			}
		}
	case "message_delta":
		if e.Delta.StopReason != "" {
			r.FinishReason = finishReason(e.Delta.StopReason)
		}
		if e.Usage != nil {
			t.merge(e.Usage, r)
			r.Reported, r.Final = true, true
		}
	case "message_stop":
		r.Ended = true
	case "content_block_start":
		b := &e.ContentBlock
		switch b.Type {
		case "tool_use", "server_tool_use":
			r.AddOutput(b.Name)
		case "text":
			r.AddOutput(b.Text)
		case "thinking":
			r.AddReasoning(b.Thinking)
		}
	case "content_block_delta":
		e.Delta.addTo(r)
	}
	return e, false
}

// merge lays u over the figures seen so far and renormalizes r.Usage.
func (t *Tap) merge(u *wireUsage, r *tap.Report) {
	set(&t.top.input, u.InputTokens)
	set(&t.top.cacheWrite, u.CacheCreationInputTokens)
	set(&t.top.cacheRead, u.CacheReadInputTokens)
	set(&t.top.output, u.OutputTokens)
	if d := u.OutputTokensDetails; d != nil {
		set(&t.top.thinking, d.ThinkingTokens)
	}
	if s := u.ServerToolUse; s != nil {
		set(&t.top.webSearch, s.WebSearchRequests)
	}
	if len(u.Iterations) > 0 {
		t.iter, t.hasIt = counts{}, true
		for _, it := range u.Iterations {
			t.iter.input = add(t.iter.input, it.InputTokens)
			t.iter.cacheWrite = add(t.iter.cacheWrite, it.CacheCreationInputTokens)
			t.iter.cacheRead = add(t.iter.cacheRead, it.CacheReadInputTokens)
			t.iter.output = add(t.iter.output, it.OutputTokens)
		}
	}
	r.Usage = t.normalized()
}

// normalized converts the raw figures into usage.Tokens. Prompt caching's
// input_tokens excludes cache reads and writes, so the prompt is their sum.
// With server-side compaction the top-level figures cover only the last
// iteration and usage.iterations[] lists every billed one, so the token
// figures are the sums over the iterations. Reasoning is output_tokens_
// details.thinking_tokens when sent (thinking is otherwise inside
// output_tokens and not split out, so 0).
func (t *Tap) normalized() usage.Tokens {
	c := t.top
	if t.hasIt {
		c.input, c.cacheWrite, c.cacheRead, c.output = t.iter.input, t.iter.cacheWrite, t.iter.cacheRead, t.iter.output
	}
	return usage.Tokens{
		PromptTokens:      add(add(c.input, c.cacheRead), c.cacheWrite),
		CachedTokens:      c.cacheRead,
		CacheWriteTokens:  c.cacheWrite,
		CompletionTokens:  c.output,
		ReasoningTokens:   c.thinking,
		WebSearchRequests: c.webSearch,
	}
}

// set overrides *dst with v when the field was sent. A negative figure is
// malformed and ignored (the ledger refuses negative counts).
func set(dst *int64, v *int64) {
	if v != nil && *v >= 0 {
		*dst = *v
	}
}

// add adds two counts, ignoring a negative one and saturating at MaxInt64.
func add(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// setError records an upstream error in r.
func setError(r *tap.Report, typ, msg string) {
	r.Error = typ + ": " + msg
	if r.FinishReason == "" {
		r.FinishReason = "error"
	}
}

// finishReason maps a Messages stop_reason to OpenAI's finish_reason:
//
//	end_turn, stop_sequence, pause_turn → "stop" (pause_turn: a server
//	    tool loop paused; the turn ended normally from the client's view)
//	max_tokens, model_context_window_exceeded → "length" (output cut off
//	    by a token limit, the response's or the context window's)
//	tool_use → "tool_calls"; refusal → "content_filter"
//
// An unknown (future) stop reason becomes "stop".
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	default:
		return "stop"
	}
}

// BodyUsage taps the usage of a whole non-streamed Messages response into r:
// the same rules as a stream's message_delta, with Reported and Final set
// when the response has usage. An error body ({"type":"error",...}) sets
// r.Error. The text, thinking and tool calls go to r.AddOutput. It returns
// an error, and leaves r alone, when body is not a JSON object of that shape.
func BodyUsage(body []byte, r *tap.Report) error {
	_, err := bodyUsage(body, r)
	return err
}

// bodyUsage is BodyUsage, also returning the decoded response.
func bodyUsage(body []byte, r *tap.Report) (*wireMessage, error) {
	m := new(wireMessage)
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("anthropic response: %w", err)
	}
	if m.Type == "error" || m.Error != nil {
		typ, msg := m.Error.info()
		setError(r, typ, msg)
		return m, nil
	}
	if m.Model != "" {
		r.ServedModel = m.Model
	}
	if m.StopReason != "" {
		r.FinishReason = finishReason(m.StopReason)
	}
	if m.Usage != nil {
		var t Tap
		t.merge(m.Usage, r)
		r.Reported, r.Final = true, true
	}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			r.AddOutput(b.Text)
		case "thinking":
			r.AddReasoning(b.Thinking)
		case "tool_use", "server_tool_use":
			r.AddOutput(b.Name)
			r.AddOutput(string(b.Input))
		}
	}
	return m, nil
}
