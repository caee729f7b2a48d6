package openai

import (
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// ChunkScan is what ScanChunk reads from a chat.completion.chunk: the same
// fields ParseChunk decodes, for a chunk that carries no error, without
// decoding it. Its byte slices point into the scanned input
// (ID, Model, FinishReason) or into its own buffer (Output), valid until
// the next scan. A ChunkScan is reused from chunk to chunk.
type ChunkScan struct {
	// ID and Model are the chunk's "id" and "model" (empty when absent or
	// null).
	ID, Model []byte
	// Created is the chunk's "created" (Unix seconds).
	Created int64
	// Choices is the number of elements of "choices".
	Choices int
	// FinishReason is the first non-empty choices[].finish_reason.
	FinishReason []byte
	// Output is the produced text of all choices, unescaped, in the order
	// ChatTap.Chunk adds it to a report.
	Output []byte
	// Reasoning is true when a choice shows reasoning text
	// (reasoning_content or reasoning).
	Reasoning bool
	// ReasoningText is that reasoning text of all choices, unescaped (a
	// part of Output), for an estimate to count as reasoning.
	ReasoningText []byte
	// Usage is the chunk's usage object, as Usage.Meter gives it, when
	// HasUsage reports one (token counts; zero for a count absent or
	// null).
	Usage usage.Tokens
	// total is the usage's total_tokens (held to encoding/json, which
	// fails on one that is not an integer; and see reasoningOutside).
	total    int64
	hasUsage bool
	// ReasoningOutside is set when the usage counts its reasoning apart
	// from completion_tokens, as Usage.ReasoningOutside reports: Usage has
	// it added to CompletionTokens.
	ReasoningOutside bool
	// usageFrom and usageTo delimit a top-level "usage":null member with
	// one adjacent comma, when usageTo > 0.
	usageFrom, usageTo int

	l jsonscan.Lexer
	// One choice's texts: delta.content, delta.reasoning_content,
	// delta.reasoning, message.content, message.reasoning_content; and its
	// tool calls' function name and arguments, the delta's and the
	// message's.
	texts        [textFields]span
	deltaCalls   [][2]span
	messageCalls [][2]span
	// tmpl is the stream's chunk shape, for the next chunk's shortcut
	// (scan_template.go).
	tmpl template
}

// span is a JSON string's raw content in the input.
type span struct {
	raw     []byte
	escaped bool
}

// Text field indexes in ChunkScan.texts.
const (
	deltaContent = iota
	deltaReasoningContent
	deltaReasoning
	messageContent
	messageReasoningContent
	choiceText // a legacy completion's "text"
	deltaRefusal
	messageRefusal
	deltaFunctionName // the deprecated "function_call"
	deltaFunctionArguments
	messageFunctionName
	messageFunctionArguments
	textFields
)

// ScanChunk reads the fields of a chat.completion.chunk that the gateway
// needs without decoding it, reusing s, and reports whether it could. It
// cannot, and the chunk must go to ParseChunk, when the chunk carries an
// error (non-null), a custom tool's call or a message's reasoning (rare:
// ParseChunk reads them), and for anything it does not read exactly as
// encoding/json would: invalid JSON, a field of an unexpected type, a
// repeated field it reads, a key with an escape, an upper-case or a
// non-ASCII letter (encoding/json matches keys case-insensitively),
// invalid UTF-8 in text, deep nesting, or an integer "created" or usage
// count beyond 18 digits (a usage count must be an integer or null, as
// encoding/json requires of Usage's fields). FuzzScanChunk checks that
// whenever it reads a chunk, ParseChunk reads the same, usage included.
//
// A chunk that repeats the previous one's shape (see template) is read by
// comparing it with that shape and lexing its text alone, to the same
// fields; FuzzScanChunkTemplate holds the two ways to each other.
func ScanChunk(data []byte, s *ChunkScan) bool {
	if s.tmpl.read(data, s) {
		return true
	}
	if !s.scan(data) {
		return false
	}
	s.tmpl.keep(data, s)
	return true
}

// scan is ScanChunk without the shortcut: it reads the whole chunk.
func (s *ChunkScan) scan(data []byte) bool {
	s.ID, s.Model, s.Created, s.Choices, s.FinishReason = nil, nil, 0, 0, nil
	s.Output, s.usageFrom, s.usageTo, s.Reasoning = s.Output[:0], 0, 0, false
	s.ReasoningText = s.ReasoningText[:0]
	s.Usage, s.total, s.hasUsage, s.ReasoningOutside = usage.Tokens{}, 0, false, false
	s.l = jsonscan.New(data)
	l := &s.l
	if !l.Lit("{") {
		return false
	}
	if l.Lit("}") {
		return l.End()
	}
	var seen uint8
	for {
		keyAt := l.Pos()
		key, ok := s.key()
		if !ok {
			return false
		}
		var bit uint8
		switch string(key) {
		case "id":
			bit = 1
			ok = s.optString(&s.ID)
		case "model":
			bit = 2
			ok = s.optString(&s.Model)
		case "created":
			bit = 4
			if !l.Lit("null") {
				s.Created, ok = l.Int()
			}
		case "choices":
			bit = 8
			ok = s.choices()
		case "usage":
			bit = 16
			ok = l.Lit("null") || s.usageObject()
			if r := reasoningOutside(s.Usage, s.total); ok && r > 0 {
				s.Usage.CompletionTokens += r
				s.ReasoningOutside = true
			}
		case "error":
			bit = 32
			ok = l.Lit("null")
		default:
			ok = l.Skip()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		valueEnd := l.Pos()
		if l.Lit("}") {
			if bit == 16 { // "usage" is last: remove the comma before it
				s.usageFrom, s.usageTo = lastComma(data, keyAt), valueEnd
			}
			break
		}
		if !l.Lit(",") {
			return false
		}
		if bit == 16 { // remove "usage" and the comma after it
			s.usageFrom, s.usageTo = keyAt, l.Pos()
		}
	}
	return l.End()
}

// lastComma returns the offset of the comma before offset i, skipping
// whitespace, or i if there is none.
func lastComma(data []byte, i int) int {
	j := i - 1
	for j >= 0 && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
		j--
	}
	if j >= 0 && data[j] == ',' {
		return j
	}
	return i
}

// StripUsage removes the top-level "usage" member (null or an object) that
// the last ScanChunk of data found, with one adjacent comma, in place, and
// returns the shortened data (data itself when there was none).
func (s *ChunkScan) StripUsage(data []byte) []byte {
	if s.usageTo == 0 {
		return data
	}
	n := copy(data[s.usageFrom:], data[s.usageTo:])
	return data[:s.usageFrom+n]
}

// HasUsageNull reports whether the scanned chunk has a top-level
// "usage":null member.
func (s *ChunkScan) HasUsageNull() bool { return s.usageTo > 0 && !s.hasUsage }

// HasUsage reports whether the scanned chunk carries a usage object (then
// s.Usage holds it), as a Chunk's Usage is not nil.
func (s *ChunkScan) HasUsage() bool { return s.hasUsage }

// UsageOnly reports whether the scanned chunk exists only to carry usage,
// as Chunk.UsageOnly does: a usage object and no choices.
func (s *ChunkScan) UsageOnly() bool { return s.hasUsage && s.Choices == 0 }

// usageObject reads a "usage" object into s.Usage as encoding/json reads
// it into Usage: each count an integer or null, each details object an
// object or null, other members skipped.
func (s *ChunkScan) usageObject() bool {
	s.hasUsage = true
	u := &s.Usage
	return s.object(func(key []byte) (uint8, bool) {
		switch string(key) {
		case "prompt_tokens":
			return 1, s.count(&u.PromptTokens)
		case "completion_tokens":
			return 2, s.count(&u.CompletionTokens)
		case "total_tokens":
			return 4, s.count(&s.total)
		case "prompt_tokens_details":
			return 8, s.l.Lit("null") || s.object(func(key []byte) (uint8, bool) {
				switch string(key) {
				case "cached_tokens":
					return 1, s.count(&u.CachedTokens)
				case "cache_write_tokens":
					return 2, s.count(&u.CacheWriteTokens)
				}
				return 0, s.l.Skip()
			})
		case "completion_tokens_details":
			return 16, s.l.Lit("null") || s.object(func(key []byte) (uint8, bool) {
				if string(key) == "reasoning_tokens" {
					return 1, s.count(&u.ReasoningTokens)
				}
				return 0, s.l.Skip()
			})
		}
		return 0, s.l.Skip()
	})
}

// count reads a token count: an integer of at most 18 digits, or null
// (which leaves it zero, as encoding/json leaves a field it has not set).
func (s *ChunkScan) count(dst *int64) bool {
	if s.l.Lit("null") {
		return true
	}
	n, ok := s.l.Int()
	*dst = n
	return ok
}

// key reads an object key and its colon. Keys that encoding/json might
// match case-insensitively to a field (upper-case or non-ASCII letters)
// and escaped keys fail.
func (s *ChunkScan) key() ([]byte, bool) {
	raw, escaped, ok := s.l.Span()
	if !ok || escaped || !s.l.Lit(":") {
		return nil, false
	}
	for _, c := range raw {
		if c >= 'A' && c <= 'Z' || c >= 0x80 {
			return nil, false
		}
	}
	return raw, true
}

// optString reads a string without escapes, or null.
func (s *ChunkScan) optString(dst *[]byte) bool {
	if s.l.Lit("null") {
		return true
	}
	raw, escaped, ok := s.l.Span()
	*dst = raw
	return ok && !escaped
}

// text reads a string or null.
func (s *ChunkScan) text(dst *span) bool {
	if s.l.Lit("null") {
		return true
	}
	var ok bool
	dst.raw, dst.escaped, ok = s.l.Span()
	return ok
}

// choices reads the "choices" array (or null).
func (s *ChunkScan) choices() bool {
	return s.l.Lit("null") || s.l.Array(func() bool {
		s.Choices++
		return s.l.Lit("null") || s.choice()
	})
}

// choice reads one element of "choices" and adds its text to s.Output.
func (s *ChunkScan) choice() bool {
	s.texts, s.deltaCalls, s.messageCalls = [textFields]span{}, s.deltaCalls[:0], s.messageCalls[:0]
	ok := s.object(func(key []byte) (uint8, bool) {
		switch string(key) {
		case "delta":
			return 1, s.message(true)
		case "message":
			return 2, s.message(false)
		case "finish_reason":
			var fr []byte
			ok := s.optString(&fr)
			if ok && len(s.FinishReason) == 0 {
				s.FinishReason = fr
			}
			return 4, ok
		case "text":
			return 8, s.text(&s.texts[choiceText])
		}
		return 0, s.l.Skip()
	})
	if !ok {
		return false
	}
	// ChatTap's order: the texts, the delta's tool calls, the message's.
	for i, t := range s.texts {
		at := len(s.Output)
		s.add(t)
		if len(t.raw) > 0 && (i == deltaReasoningContent || i == deltaReasoning || i == messageReasoningContent) {
			s.Reasoning = true
			s.ReasoningText = append(s.ReasoningText, s.Output[at:]...)
		}
	}
	for _, calls := range [2][][2]span{s.deltaCalls, s.messageCalls} {
		for _, c := range calls {
			s.add(c[0])
			s.add(c[1])
		}
	}
	return true
}

// add appends a text's value to s.Output.
func (s *ChunkScan) add(t span) {
	if t.escaped {
		s.Output = jsonscan.Unquote(s.Output, t.raw)
	} else {
		s.Output = append(s.Output, t.raw...)
	}
}

// message reads a choice's "delta" (isDelta) or "message" object, or null.
func (s *ChunkScan) message(isDelta bool) bool {
	if s.l.Lit("null") {
		return true
	}
	content, reasoningContent, refusal, fn, calls := deltaContent, deltaReasoningContent, deltaRefusal, deltaFunctionName, &s.deltaCalls
	if !isDelta {
		content, reasoningContent, refusal, fn, calls = messageContent, messageReasoningContent, messageRefusal, messageFunctionName, &s.messageCalls
	}
	return s.object(func(key []byte) (uint8, bool) {
		switch k := string(key); {
		case k == "content":
			return 1, s.text(&s.texts[content])
		case k == "reasoning_content":
			return 2, s.text(&s.texts[reasoningContent])
		case k == "reasoning" && isDelta:
			return 4, s.text(&s.texts[deltaReasoning])
		case k == "reasoning":
			return 0, false // a message's reasoning (ParseChunk reads it): rare, not scanned
		case k == "tool_calls":
			return 8, s.toolCalls(calls)
		case k == "refusal":
			return 16, s.text(&s.texts[refusal])
		case k == "function_call":
			return 32, s.l.Lit("null") || s.function(&s.texts[fn], &s.texts[fn+1])
		}
		return 0, s.l.Skip()
	})
}

// toolCalls reads a "tool_calls" array (or null), appending each call's
// function name and arguments to calls.
func (s *ChunkScan) toolCalls(calls *[][2]span) bool {
	return s.l.Lit("null") || s.l.Array(func() bool {
		*calls = append(*calls, [2]span{})
		return s.l.Lit("null") || s.toolCall(&(*calls)[len(*calls)-1])
	})
}

// toolCall reads one tool call object: its function's name and arguments.
func (s *ChunkScan) toolCall(c *[2]span) bool {
	return s.object(func(key []byte) (uint8, bool) {
		switch string(key) {
		case "custom":
			return 0, false // a custom tool's call (ParseChunk reads it): not scanned
		case "function":
		default:
			return 0, s.l.Skip()
		}
		return 1, s.l.Lit("null") || s.function(&c[0], &c[1])
	})
}

// function reads a function object (a tool call's, or a function_call):
// its name and arguments.
func (s *ChunkScan) function(name, arguments *span) bool {
	return s.object(func(key []byte) (uint8, bool) {
		switch string(key) {
		case "name":
			return 1, s.text(name)
		case "arguments":
			return 2, s.text(arguments)
		}
		return 0, s.l.Skip()
	})
}

// object reads a JSON object, calling member for each key with the lexer
// at the value; member reads the value and returns a bit for the key (0 for
// a key it skipped), so that a repeated key fails.
func (s *ChunkScan) object(member func(key []byte) (bit uint8, ok bool)) bool {
	l := &s.l
	if !l.Lit("{") {
		return false
	}
	if l.Lit("}") {
		return true
	}
	var seen uint8
	for {
		key, ok := s.key()
		if !ok {
			return false
		}
		bit, ok := member(key)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if l.Lit("}") {
			return true
		}
		if !l.Lit(",") {
			return false
		}
	}
}

// Scanned observes one chunk read by ScanChunk, recording in r what Chunk
// records for the same chunk (a scanned chunk has no error).
func (t *ChatTap) Scanned(s *ChunkScan, r *tap.Report) {
	if len(s.Model) > 0 && string(s.Model) != r.ServedModel {
		r.ServedModel = string(s.Model)
	}
	if len(s.FinishReason) > 0 {
		if string(s.FinishReason) != r.FinishReason {
			r.FinishReason = string(s.FinishReason)
		}
		t.finished = true
	}
	r.AddOutputBytes(s.Output)
	r.Reasoning.Write(s.ReasoningText)
	if s.Reasoning {
		r.ReasoningShown = true
	}
	if s.Choices > 0 {
		t.settled = false
	}
	if s.hasUsage {
		if r.SetUsage(s.Usage) {
			r.ReasoningOutside = s.ReasoningOutside
		}
		if t.finished || s.Choices == 0 && r.Output.Len() > 0 {
			r.MarkFinal()
		}
		t.settled = t.finished && s.Choices == 0 && r.Output.Len() > 0
		t.afterFinish = t.finished
	}
}
