package gemini

import (
	"bytes"
	"encoding/json"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"strconv"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// NewStream starts the translation of one streamGenerateContent?alt=sse
// response into chat.completion.chunk payloads carrying id, model (the
// model the client asked for) and created (Unix seconds). The result is a
// *Stream; see Stream.Event.
func (Chat) NewStream(id, model string, created int64) provider.ChunkStream {
	p := []byte(`{"id":`)
	p = openai.AppendString(p, id)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, created, 10)
	p = append(p, `,"model":`...)
	p = openai.AppendString(p, model)
	p = append(p, `,"choices":[{"index":`...)
	return &Stream{prefix: p, callID: callIDPrefix(id)}
}

// Stream translates one Gemini response stream into OpenAI chunks. It is
// the chunkStream of the gateway's chat route for Gemini upstreams.
type Stream struct {
	tap     Tap
	prefix  []byte // the chunk up to the choice index
	callID  string // its tool call ids' opening (see callIDPrefix)
	choices []choiceState
	// at maps a candidate index to its state in choices: an upstream may
	// send any number of candidates, and a scan of choices for each made
	// a stream quadratic in them.
	at map[int]int
}

// choiceState is what a Stream remembers of one candidate (one choice).
type choiceState struct {
	index   int
	started bool   // the role chunk was sent
	calls   int    // tool calls sent so far
	finish  string // the candidate's last finishReason, sent by End
}

// Event taps ev's usage into r exactly as Tap does and appends to dst the
// chunk payloads (JSON, without "data: " framing) it becomes. Candidate n
// becomes choice n (index 0 unless the request asked for several):
//
//   - before a choice's first chunk, a role chunk
//     {"role":"assistant","content":""};
//   - a text part: delta.content; a thought part (thought:true):
//     delta.reasoning_content; empty text parts are dropped;
//   - a functionCall part: delta.tool_calls with one complete call, whose
//     id is "call_<answer>_<choice>_<i>" (see callIDPrefix), i its index
//     among the choice's calls, and whose
//     arguments are the args object as a JSON string ("{}" when absent).
//     Gemini matches function responses to calls by name, so the id only
//     has to lead Request from a tool message back to its call's name;
//     the call's thoughtSignature is not carried (see Request);
//   - a finishReason: a chunk with an empty delta and the mapped
//     finish_reason (see Tap); a prompt blocked outright: choice 0 with
//     finish_reason "content_filter";
//   - an error, framed or raw: {"error":{"message","type","code"}}, with
//     type "upstream_error" and code Gemini's status (such as "CANCELLED").
//
// It never appends usage chunks or [DONE]; the core adds those.
func (s *Stream) Event(ev *sse.Event, r *tap.Report, dst [][]byte) [][]byte {
	return s.event(ev, r, dst, true)
}

// event is Event, its chunks read through the fast scanner or not.
func (s *Stream) event(ev *sse.Event, r *tap.Report, dst [][]byte, fast bool) [][]byte {
	t := &s.tap
	t.payloads = t.collect(ev, t.payloads[:0])
	for _, p := range t.payloads {
		t.decode(p, fast)
		for i := range t.resps {
			resp := &t.resps[i]
			t.observe(resp, r)
			dst = s.translate(resp, dst)
		}
	}
	t.release()
	return dst
}

// translate appends the chunks of one response to dst.
func (s *Stream) translate(resp *response, dst [][]byte) [][]byte {
	for i := range resp.Candidates {
		c := &resp.Candidates[i]
		st := s.choice(c.Index)
		for j := range c.Content.Parts {
			p := &c.Content.Parts[j]
			if fc := p.FunctionCall; fc != nil {
				dst = s.start(st, dst)
				dst = append(dst, s.toolCallChunk(st, fc))
				st.calls++
			}
			if p.Text == "" {
				continue
			}
			dst = s.start(st, dst)
			field := `{"content":`
			if p.Thought {
				field = `{"reasoning_content":`
			}
			b := s.chunk(st.index, len(p.Text)+len(field)+8)
			b = append(b, field...)
			b = openai.AppendString(b, p.Text)
			dst = append(dst, s.end(b, ""))
		}
		if c.FinishReason != "" {
			st.finish = c.FinishReason // sent once, at the end (see End)
		}
	}
	if len(resp.Candidates) == 0 && resp.PromptFeedback != nil && resp.PromptFeedback.BlockReason != "" {
		dst = s.finish(s.choice(0), "content_filter", dst)
	}
	if desc, code := errorOf(resp.Error); desc != "" {
		dst = s.finishes(dst) // the choices that finished before it, then the error
		dst = append(dst, errorPayload(desc, code))
	}
	return dst
}

// End appends each choice's finish chunk, once, with the candidate's last
// finishReason (provider.ChunkStreamEnd), in the choices' order. Vertex AI
// puts finishReason "STOP" on every chunk of a stream
// (fixtures/gemini/vertex-error-mid-stream.sse): sent as it came, the
// client got finish_reason "stop" after every piece of content, where
// OpenAI sends one per choice, on its last chunk (a review). An upstream
// error sends the finishes held so far before its error chunk.
func (s *Stream) End(_ *tap.Report, dst [][]byte) [][]byte { return s.finishes(dst) }

// finishes appends the finish chunks held (see End) and forgets them.
func (s *Stream) finishes(dst [][]byte) [][]byte {
	for i := range s.choices {
		st := &s.choices[i]
		if st.finish != "" {
			dst = s.finish(st, finishReason(st.finish, st.calls > 0), dst)
			st.finish = ""
		}
	}
	return dst
}

// choice returns the state of the choice for candidate index i.
func (s *Stream) choice(i int) *choiceState {
	i = max(i, 0)
	if k, ok := s.at[i]; ok {
		return &s.choices[k]
	}
	if s.at == nil {
		s.at = make(map[int]int)
	}
	s.at[i] = len(s.choices)
	s.choices = append(s.choices, choiceState{index: i})
	return &s.choices[len(s.choices)-1]
}

// start appends the role chunk if the choice has had none.
func (s *Stream) start(st *choiceState, dst [][]byte) [][]byte {
	if st.started {
		return dst
	}
	st.started = true
	b := s.chunk(st.index, 40)
	b = append(b, `{"role":"assistant","content":""`...)
	return append(dst, s.end(b, ""))
}

func (s *Stream) finish(st *choiceState, reason string, dst [][]byte) [][]byte {
	dst = s.start(st, dst)
	b := s.chunk(st.index, 4)
	b = append(b, '{')
	return append(dst, s.end(b, reason))
}

func (s *Stream) toolCallChunk(st *choiceState, fc *functionCall) []byte {
	b := s.chunk(st.index, len(fc.Name)+len(fc.Args)+96)
	b = append(b, `{"tool_calls":[{"index":`...)
	b = strconv.AppendInt(b, int64(st.calls), 10)
	b = append(b, `,"id":`...)
	b = openai.AppendString(b, callID(s.callID, st.index, st.calls))
	b = append(b, `,"type":"function","function":{"name":`...)
	b = openai.AppendString(b, fc.Name)
	b = append(b, `,"arguments":`...)
	b = openai.AppendString(b, argsJSON(fc.Args))
	b = append(b, "}}]"...)
	return s.end(b, "")
}

// argsJSON returns a function call's args as compact JSON, "{}" if absent.
func argsJSON(args json.RawMessage) string {
	if len(args) == 0 || string(args) == "null" {
		return "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) == nil {
		return buf.String()
	}
	return string(args)
}

// chunk starts a chunk payload for choice i, up to the opening of "delta".
func (s *Stream) chunk(i, extra int) []byte {
	b := make([]byte, 0, len(s.prefix)+extra+64)
	b = append(b, s.prefix...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, `,"delta":`...)
}

// end closes the delta object b holds open, and the chunk.
func (s *Stream) end(b []byte, reason string) []byte {
	b = append(b, `},"finish_reason":`...)
	if reason == "" {
		b = append(b, "null"...)
	} else {
		b = openai.AppendString(b, reason)
	}
	return append(b, "}]}"...)
}
