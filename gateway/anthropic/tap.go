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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Tap reads usage from one Anthropic Messages stream, as POST /v1/messages
// with "stream": true sends it, event by event (see Event). The zero value
// is ready; a Tap serves one stream and is not safe for concurrent use.
type Tap struct {
	top    counts // the latest readable figure of every top-level usage field
	iter   counts // the sum over usage.iterations[], when one was sent
	hasIt  bool
	opened bool // a readable message_start's usage, or a message_delta's, was taken
	// unread has a bit set for each figure (see the field constants) whose
	// latest report could not be read: a report is the provider's figures
	// only while it is 0.
	unread uint8
	// carried has a bit set for each top-level figure a message_delta (or
	// a whole body) carried readably: with iterations[], such a figure
	// bounds its sum from below (see normalized); message_start's do not.
	carried uint8
	inDelta bool // merge is reading a message_delta's usage
	// final says a message_delta's report was taken as final, and
	// keepsFinal that a later one may not lower it (see keepFinal: the
	// chat route's Stream; the native route decides that itself).
	final, keepsFinal bool
	ev                wireEvent // the event being decoded, reused
	buf               []byte    // fastDelta's scratch space
}

// counts are Anthropic's raw usage figures, in tokens (webSearch counts
// requests). input excludes cache reads and writes.
type counts struct {
	input, cacheWrite, cacheRead, output, thinking, webSearch int64
}

// Bits of Tap.unread: one per top-level figure, and one for iterations[].
const (
	fInput = 1 << iota
	fCacheWrite
	fCacheRead
	fOutput
	fThinking
	fWebSearch
	fIterations
	fTop = fInput | fCacheWrite | fCacheRead | fOutput | fThinking | fWebSearch
)

// Event taps one upstream SSE event into r (it keeps none of ev's bytes):
//
//   - message_start: message.usage opens the count (Reported, not Final);
//     message.model becomes r.ServedModel.
//   - message_delta: usage is cumulative, so each field it carries replaces
//     the earlier figure and fields it omits keep theirs (older streams
//     send only output_tokens); it sets Final (a message_delta without
//     usage, which Anthropic never sends, does not). delta.stop_reason becomes
//     r.FinishReason (see finishReason).
//   - Counts are read leniently (see count). A figure that still cannot be
//     read (negative, fractional, a string of letters, a usage that is not
//     an object) keeps its last readable value, but the report is not the
//     provider's until a later report carries that figure readably:
//     message_start does not set Reported and message_delta does not set
//     Final, so such a stream resolves as partial (its output estimated)
//     or estimated. A field of the wrong type elsewhere in message_start or
//     message_delta is skipped without losing the usage the event carries.
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
	if !decodeEvent(ev.Data, e) {
		if e, isErr, ok := t.observeShallow(ev, r); ok {
			return e, isErr
		}
		// Malformed or of an unexpected shape: skipped, unless it says it is
		// an error.
		var head struct{ Type string }
		isErr = isErr || json.Unmarshal(ev.Data, &head) == nil && head.Type == "error"
		if !isErr {
			countContent(ev.Data, r)
		}
		e = nil
	} else if e.Type == "error" {
		isErr = true
	}
	if isErr {
		typ, msg := e.errorInfo()
		setError(r, typ, msg)
		if !r.Final && r.Output.Len() == 0 {
			// message_start, then an error before any content (Anthropic's
			// usual overloaded_error): a refusal, which bills nothing
			// (docs/billing.md), not message_start's opening figures.
			r.Usage, r.Reported = usage.Tokens{}, false
		}
		return e, true
	}
	if _, folded, _ := jsonscan.FoldedKey(ev.Data, "input"); folded {
		// Two keys one in case: encoding/json read the last, a client's
		// SDK may read the other ({"text":"…","Text":""}). The event
		// whole is counted as output: never free, whatever a client
		// reads. A tool's own input is not looked into.
		r.AddOutputBytes(ev.Data)
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
			if m.Usage != nil && !t.opened {
				// Only the first readable message_start opens the count
				// (DESIGN: message_delta overrides it, never the other way):
				// a second one, or one after a message_delta, would reset
				// the figures a message_delta gave.
				t.merge(m.Usage, r)
				if t.unread == 0 {
					t.opened = true
					r.SetUsage(r.Usage)
				}
			}
		}
	case "message_delta":
		if t.final && t.keepsFinal {
			// A final report taken already: this one may not lower it
			// (see keepFinal).
			defer t.keepFinal(r, t.saved(r))
		}
		if e.Delta.StopReason != "" {
			r.FinishReason = finishReason(e.Delta.StopReason)
		}
		if e.Usage != nil {
			t.opened = true
			t.inDelta = true
			t.merge(e.Usage, r)
			t.inDelta = false
			if e.Usage.OutputTokens == nil && len(e.Usage.Iterations) == 0 && !e.Usage.garbled {
				// Anthropic's message_delta always counts the output (older
				// streams send that alone): one that does not (null, or left
				// out) leaves the output unknown, not message_start's figure.
				t.unread |= fOutput
			}
			if t.unread == 0 {
				r.Reported = true
				r.MarkFinal()
				t.final = true
			}
		}
	case "message_stop":
		r.Ended = true
	case "content_block_start":
		e.ContentBlock.addTo(r)
	case "content_block_delta":
		e.Delta.addTo(r)
	}
	return e, false
}

// tapState is what keepFinal restores: the tap's figures and the report's
// usage and finish reason.
type tapState struct {
	top, iter       counts
	hasIt           bool
	unread, carried uint8
	usage           usage.Tokens
	finish          string
}

// saved is t's and r's state before an event.
func (t *Tap) saved(r *tap.Report) tapState {
	return tapState{t.top, t.iter, t.hasIt, t.unread, t.carried, r.Usage, r.FinishReason}
}

// keepFinal undoes a message_delta, after a final one, that lowered a
// count of it (was: the state before it): Anthropic's counts are
// cumulative and never fall, and the native route bills the report before
// such a one and does not relay it (relayNative), so the chat route,
// translating the same bytes, bills that report too; it had billed the
// lowered figures (5 of 50 output tokens, in a review).
func (t *Tap) keepFinal(r *tap.Report, was tapState) {
	if !tap.Lowers(r.Usage, was.usage) {
		return
	}
	t.top, t.iter, t.hasIt, t.unread, t.carried = was.top, was.iter, was.hasIt, was.unread, was.carried
	r.Usage, r.FinishReason = was.usage, was.finish
}

// merge lays u over the figures seen so far and renormalizes r.Usage from
// the readable ones; t.unread says which figures u left unknown.
func (t *Tap) merge(u *wireUsage, r *tap.Report) {
	if u.garbled {
		t.unread |= fTop
		return
	}
	t.set(fInput, &t.top.input, u.InputTokens)
	t.set(fCacheWrite, &t.top.cacheWrite, u.CacheCreationInputTokens)
	t.set(fCacheRead, &t.top.cacheRead, u.CacheReadInputTokens)
	t.set(fOutput, &t.top.output, u.OutputTokens)
	if d := u.OutputTokensDetails; d != nil {
		t.set(fThinking, &t.top.thinking, d.ThinkingTokens)
	}
	if s := u.ServerToolUse; s != nil {
		t.set(fWebSearch, &t.top.webSearch, s.WebSearchRequests)
	}
	if len(u.Iterations) > 0 {
		var sum counts
		ok := true
		for _, it := range u.Iterations {
			ok = ok && it.InputTokens >= 0 && it.CacheCreationInputTokens >= 0 && it.CacheReadInputTokens >= 0 && it.OutputTokens >= 0
			sum.input = add(sum.input, int64(it.InputTokens))
			sum.cacheWrite = add(sum.cacheWrite, int64(it.CacheCreationInputTokens))
			sum.cacheRead = add(sum.cacheRead, int64(it.CacheReadInputTokens))
			sum.output = add(sum.output, int64(it.OutputTokens))
		}
		if ok {
			t.iter, t.hasIt = sum, true
			t.unread &^= fIterations
		} else {
			t.unread |= fIterations
		}
	}
	r.Usage = t.normalized()
}

// normalized converts the raw figures into usage.Tokens. Prompt caching's
// input_tokens excludes cache reads and writes, so the prompt is their sum.
// With server-side compaction the top-level figures cover only the last
// iteration and usage.iterations[] lists every billed one, so the token
// figures are the sums over the iterations, never below a top-level
// figure a message_delta carried (the sums include it). Reasoning is output_tokens_
// details.thinking_tokens when sent (thinking is otherwise inside
// output_tokens and not split out, so 0).
func (t *Tap) normalized() usage.Tokens {
	c := t.top
	if t.hasIt {
		// Every iteration is in the sums, the last one too: a sum below
		// its top-level figure (iterations of null or {}, or a later
		// message_delta without iterations[]) is not the bill.
		c.input, c.cacheWrite = t.atLeast(fInput, t.iter.input), t.atLeast(fCacheWrite, t.iter.cacheWrite)
		c.cacheRead, c.output = t.atLeast(fCacheRead, t.iter.cacheRead), t.atLeast(fOutput, t.iter.output)
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

// atLeast is sum, an iterations[] sum, raised to its top-level figure
// when a message_delta carried that one (field says which).
func (t *Tap) atLeast(field uint8, sum int64) int64 {
	if t.carried&field == 0 {
		return sum
	}
	var top int64
	switch field {
	case fInput:
		top = t.top.input
	case fCacheWrite:
		top = t.top.cacheWrite
	case fCacheRead:
		top = t.top.cacheRead
	case fOutput:
		top = t.top.output
	}
	return max(sum, top)
}

// set overrides *dst with v when the field was sent and could be read,
// and records in t.unread whether it could.
func (t *Tap) set(field uint8, dst *int64, v *tap.Count) {
	switch {
	case v == nil: // not sent: the earlier figure stands, known or not
	case *v < 0:
		t.unread |= field
	default:
		*dst = int64(*v)
		t.unread &^= field
		if t.inDelta {
			t.carried |= field
		}
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
// when the response has usage that could be read (else it is estimated).
// An error body ({"type":"error",...}) sets r.Error. The text, thinking
// and tool calls go to r.AddOutput. A field of the wrong type is skipped,
// as in a stream's message_delta. It returns an error, and leaves r alone,
// when body is not a JSON object.
func BodyUsage(body []byte, r *tap.Report) error {
	_, err := bodyUsage(body, r)
	return err
}

// bodyUsage is BodyUsage, also returning the decoded response.
func bodyUsage(body []byte, r *tap.Report) (*wireMessage, error) {
	m := new(wireMessage)
	if err := json.Unmarshal(body, m); err != nil {
		// A field of the wrong type in a response object is skipped, the
		// rest kept (see decodeEvent); anything else is no response.
		var te *json.UnmarshalTypeError
		if shallow, ok := jsonscan.Shallow(body); !errors.As(err, &te) && ok {
			// Valid JSON nested past encoding/json's 10,000 levels (a
			// hostile upstream's member beside the response's own): read
			// as its members within jsonscan.MaxDepth levels.
			return bodyUsage(shallow, r)
		}
		if !errors.As(err, &te) || kindOf(body) != '{' {
			return nil, fmt.Errorf("anthropic response: %w", err)
		}
		var probe struct {
			Usage json.RawMessage `json:"usage"`
		}
		_ = json.Unmarshal(body, &probe)
		m.Usage = recheckUsage(probe.Usage, m.Usage)
	}
	if m.Type == "error" || m.Error != nil {
		typ, msg := m.Error.info()
		setError(r, typ, msg)
		return m, nil
	}
	if m.Model != "" {
		r.ServedModel = m.Model
	}
	if _, folded, _ := jsonscan.FoldedKey(body, "input"); folded {
		r.AddOutputBytes(body) // as a stream's event (see observe)
	}
	if m.StopReason != "" {
		r.FinishReason = finishReason(m.StopReason)
	}
	r.AmbiguousUsage = tap.AmbiguousUsage(body, "usage", usageKeys)
	if m.Usage != nil {
		t := Tap{inDelta: true}
		t.merge(m.Usage, r)
		if t.unread == 0 {
			r.Reported, r.Final = true, true
		}
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

// usageKeys are the members of a Messages usage object the tap reads
// (see tap.AmbiguousUsage).
var usageKeys = tap.UsageKeys{
	"input_tokens": nil, "cache_creation_input_tokens": nil, "cache_read_input_tokens": nil, "output_tokens": nil,
	"output_tokens_details": {"thinking_tokens": nil}, "server_tool_use": {"web_search_requests": nil},
	"iterations": {"input_tokens": nil, "cache_creation_input_tokens": nil, "cache_read_input_tokens": nil, "output_tokens": nil},
}

// observeShallow is observe of ev's data when it is valid JSON nested past
// encoding/json's 10,000 levels (a hostile upstream's member beside the
// event's own), read as its members within jsonscan.MaxDepth levels
// (jsonscan.Shallow); ok is false, and nothing is read, for any other
// data. Not inlined: observe's frame, which the relay's stack holds, stays
// as small.
//
//go:noinline
func (t *Tap) observeShallow(ev *sse.Event, r *tap.Report) (e *wireEvent, isErr, ok bool) {
	data, ok := jsonscan.Shallow(ev.Data)
	if !ok {
		return nil, false, false
	}
	shallow := *ev
	shallow.Data = data
	e, isErr = t.observe(&shallow, r)
	return e, isErr, true
}

// decodeEvent decodes one event's data into e, which must be zero, and
// reports whether it could. encoding/json checks the syntax of the whole
// value first and skips a field of the wrong type (a float index, a
// number for a string) but still decodes the rest: the usage of
// message_start and message_delta is kept then (see recheckUsage), as
// losing it would bill message_start's placeholder output (or nothing) as
// final. Other events with a field of the wrong type are dropped, as
// before.
func decodeEvent(data []byte, e *wireEvent) bool {
	err := json.Unmarshal(data, e)
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || e.Type != "message_start" && e.Type != "message_delta" {
		*e = wireEvent{}
		return false
	}
	var probe struct {
		Usage   json.RawMessage `json:"usage"`
		Message struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"message"`
	}
	_ = json.Unmarshal(data, &probe) // a type error here too leaves the raw values decoded
	if e.Type == "message_delta" {
		e.Usage = recheckUsage(probe.Usage, e.Usage)
	} else if e.Message != nil {
		e.Message.Usage = recheckUsage(probe.Message.Usage, e.Message.Usage)
	}
	return true
}

// addTo records the output a content_block_start carries in r.
func (b *wireBlock) addTo(r *tap.Report) {
	switch b.Type {
	case "tool_use", "server_tool_use":
		r.AddOutput(b.Name)
		if in := bytes.TrimSpace(b.Input); len(in) > 0 && !bytes.Equal(in, []byte("{}")) && !bytes.Equal(in, []byte("null")) {
			// Anthropic starts a tool call with an empty input and
			// streams it in input_json_delta; an input given whole
			// here is output the client takes as the call's.
			r.AddOutputBytes(in)
		}
	case "text":
		r.AddOutput(b.Text)
	case "thinking":
		r.AddReasoning(b.Thinking)
	}
}

// countContent counts in r the output of a content event that decodeEvent
// dropped for a field of another type elsewhere (an index written 0.0 or
// "0", a block id that is a number): a client that reads its text still
// shows it, so it is output, though the event is not translated.
// encoding/json decodes the rest of an object past such a field.
func countContent(data []byte, r *tap.Report) {
	var e wireEvent
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(data, &e); !errors.As(err, &te) {
		return
	}
	switch e.Type {
	case "content_block_start":
		e.ContentBlock.addTo(r)
	case "content_block_delta":
		e.Delta.addTo(r)
	}
}
