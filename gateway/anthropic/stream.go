package anthropic

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// Stream translates one Anthropic Messages stream into OpenAI
// chat.completion.chunk payloads (see Event). Chat.NewStream makes one; it
// is not safe for concurrent use.
type Stream struct {
	tap    Tap
	prefix []byte         // every chunk's opening, up to `"delta":`
	tools  map[int64]int  // content block index → OpenAI tool call index
	args   map[int64]bool // content block index → its tool call has arguments
	nTools int            // tool_use blocks seen
	role   bool           // the role chunk went out
	// finished: the finish chunk went out (a message_delta repeated sends
	// no second one).
	finished bool
}

// NewStream starts the translation of one response stream into chunks
// carrying id, model (the model the client asked for) and created (Unix
// seconds).
func (Chat) NewStream(id, model string, created int64) provider.ChunkStream {
	p := append(make([]byte, 0, 96+len(id)+len(model)), `{"id":`...)
	p = openai.AppendString(p, id)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, created, 10)
	p = append(p, `,"model":`...)
	p = openai.AppendString(p, model)
	p = append(p, `,"choices":[{"index":0,"delta":`...)
	return &Stream{prefix: p, tap: Tap{keepsFinal: true}}
}

// Event taps ev's usage into r exactly as Tap.Event does, and appends to
// dst the chunk payloads (JSON, unframed) it becomes, each choice at index 0:
//
//   - {"role":"assistant","content":""} once, before the first other
//     chunk: not at message_start, so that an error before any output
//     (overloaded_error) is the stream's first chunk, and fails over
//   - text_delta → delta.content; thinking_delta → delta.reasoning_content
//   - content_block_start of a tool_use → delta.tool_calls[{index, id,
//     type:"function", function:{name, arguments:""}}], the index counting
//     tool_use blocks from 0; its input_json_delta fragments →
//     delta.tool_calls[{index, function:{arguments}}]; a tool_use block
//     that ends with no fragment (input {}) → arguments "{}", as OpenAI
//     streams a call without arguments
//   - message_delta with a stop_reason → an empty delta with the mapped
//     finish_reason (see finishReason), once: Anthropic may send more than
//     one message_delta, and an OpenAI stream ends a choice once
//   - a message_delta that lowers a count of the final report before it is
//     not taken (see Tap.keepFinal)
//   - an error event → {"error":{"message","type","code":null}}, type being
//     Anthropic's error type (overloaded_error, api_error, ...)
//
// Server tools (server_tool_use and their results), signatures, redacted
// thinking, citations and compaction blocks have no OpenAI chunk form and
// are dropped. Event never appends usage or [DONE]: the core adds those.
func (s *Stream) Event(ev *sse.Event, r *tap.Report, dst [][]byte) [][]byte {
	e, isErr := s.tap.observe(ev, r)
	if isErr {
		typ, msg := e.errorInfo()
		b := append(make([]byte, 0, 64+len(msg)), `{"error":{"message":`...)
		b = openai.AppendString(b, msg)
		b = append(b, `,"type":`...)
		b = openai.AppendString(b, typ)
		return append(dst, append(b, `,"code":null}}`...))
	}
	if e == nil {
		return dst
	}
	switch e.Type {
	case "message_start":
		// No chunk yet: the role chunk goes out with the first chunk of
		// output (start), so that a stream refused before any (an
		// overloaded_error after message_start, Anthropic's usual
		// overload) has sent the client nothing, and fails over.
		return dst
	case "content_block_start":
		switch b := &e.ContentBlock; b.Type {
		case "text":
			return s.text(dst, "content", b.Text)
		case "thinking":
			return s.text(dst, "reasoning_content", b.Thinking)
		case "tool_use":
			if s.tools == nil {
				s.tools, s.args = make(map[int64]int), make(map[int64]bool)
			}
			i := s.nTools
			s.nTools++
			s.tools[e.Index] = i
			dst = s.start(dst)
			c := s.chunk(len(b.ID) + len(b.Name))
			c = append(c, `{"tool_calls":[{"index":`...)
			c = strconv.AppendInt(c, int64(i), 10)
			c = append(c, `,"id":`...)
			c = openai.AppendString(c, b.ID)
			c = append(c, `,"type":"function","function":{"name":`...)
			c = openai.AppendString(c, b.Name)
			dst = append(dst, s.end(append(c, `,"arguments":""}}]}`...), ""))
			// An input given whole here, not in input_json_delta fragments
			// (Anthropic streams {} here; some compatible servers send it
			// all), is the call's arguments: the tap bills it as output,
			// and the client got "{}" (a review).
			var in bytes.Buffer
			if json.Compact(&in, b.Input) == nil && in.Len() > 2 && in.Bytes()[0] == '{' {
				s.args[e.Index] = true
				dst = s.arguments(dst, i, in.String())
			}
			return dst
		}
	case "content_block_delta":
		switch d := &e.Delta; d.Type {
		case "text_delta":
			return s.text(dst, "content", d.Text)
		case "thinking_delta":
			return s.text(dst, "reasoning_content", d.Thinking)
		case "input_json_delta":
			i, ok := s.tools[e.Index]
			if !ok || d.PartialJSON == "" {
				return dst
			}
			s.args[e.Index] = true
			return s.arguments(dst, i, d.PartialJSON)
		}
	case "content_block_stop":
		if i, ok := s.tools[e.Index]; ok && !s.args[e.Index] {
			s.args[e.Index] = true
			return s.arguments(dst, i, "{}")
		}
	case "message_delta":
		if e.Delta.StopReason != "" && !s.finished {
			s.finished = true
			dst = s.start(dst)
			return append(dst, s.end(append(s.chunk(0), `{}`...), finishReason(e.Delta.StopReason)))
		}
	}
	return dst
}

// arguments appends a chunk of tool call i's arguments, a JSON fragment.
func (s *Stream) arguments(dst [][]byte, i int, fragment string) [][]byte {
	dst = s.start(dst)
	c := s.chunk(len(fragment))
	c = append(c, `{"tool_calls":[{"index":`...)
	c = strconv.AppendInt(c, int64(i), 10)
	c = append(c, `,"function":{"arguments":`...)
	c = openai.AppendString(c, fragment)
	return append(dst, s.end(append(c, `}}]}`...), ""))
}

// Begin appends the role chunk to dst, unless it was sent
// (provider.ChunkStreamBegin).
func (s *Stream) Begin(dst [][]byte) [][]byte { return s.start(dst) }

// start appends the role chunk if it has not gone out yet.
func (s *Stream) start(dst [][]byte) [][]byte {
	if s.role {
		return dst
	}
	s.role = true
	return append(dst, s.end(append(s.chunk(0), `{"role":"assistant","content":""}`...), ""))
}

// text appends a chunk whose delta has one string field, unless v is empty.
func (s *Stream) text(dst [][]byte, field, v string) [][]byte {
	if v == "" {
		return dst
	}
	dst = s.start(dst)
	c := append(s.chunk(len(v)), `{"`...)
	c = append(c, field...)
	c = append(c, `":`...)
	c = openai.AppendString(c, v)
	return append(dst, s.end(append(c, '}'), ""))
}

// chunk returns a new payload holding the prefix, with room for n more
// bytes of content.
func (s *Stream) chunk(n int) []byte {
	return append(make([]byte, 0, len(s.prefix)+n+n/8+96), s.prefix...)
}

// end closes a payload after its delta, with finish_reason null when
// finish is empty.
func (s *Stream) end(c []byte, finish string) []byte {
	if finish == "" {
		return append(c, `,"finish_reason":null}]}`...)
	}
	c = append(c, `,"finish_reason":"`...)
	c = append(c, finish...)
	return append(c, `"}]}`...)
}
