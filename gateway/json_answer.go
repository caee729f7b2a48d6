package gateway

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// jsonAnswer reports whether an upstream response is a whole JSON body
// (Content-Type application/json, or a +json type), which an upstream may
// send to a stream request it did not stream: it is then billed from the
// body's usage, as a non-streamed answer is, and not read as SSE (which
// would find no events in it, and bill nothing for what the client gets).
func jsonAnswer(h http.Header) bool {
	ct := h.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// jsonStart reports whether b, past leading JSON whitespace, starts a
// JSON object or array.
func jsonStart(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// parseAnswer reads a whole chat answer (a chat.completion, or a legacy
// text_completion) as the stream's chunks are read: by openai.ParseChunk,
// and, when a field has another type than OpenAI's ("created" as a float,
// content as an array of parts, counts written as 900.0), by
// openai.ParseChunkLenient, so that a body is billed from the provider's
// usage as its stream would be, not refused and estimated. A usage whose
// counts still cannot be read leaves Usage nil (UnreadableUsage set): the
// answer is relayed and its usage estimated. The error is the lenient
// reader's (not a JSON object), or openai.ErrTooComplex. A member nested
// past encoding/json's depth is read as null (jsonscan.Shallow).
func parseAnswer(body []byte) (*openai.Chunk, error) {
	c, err := openai.ParseChunk(body)
	if err != nil && !errors.Is(err, openai.ErrTooComplex) {
		if shallow, ok := jsonscan.Shallow(body); ok {
			// Valid JSON nested past encoding/json's 10,000 levels (a
			// hostile upstream's member beside the answer's own): read as
			// its members within jsonscan.MaxDepth levels.
			return parseAnswer(shallow)
		}
		c, err = openai.ParseChunkLenient(body)
	}
	return c, err
}

// readCloser reads from one reader and closes another (a body read in
// part, then on).
type readCloser struct {
	io.Reader
	io.Closer
}

// relayAnswerAsStream answers a chat (or legacy completions) stream
// request whose upstream answered with a whole body: the body's usage is
// tapped (translated by tr unless the upstream speaks OpenAI), and the
// client gets the stream it asked for, the answer as one chunk, then the
// usage chunk when asked for, and [DONE], the event durable before that
// end. A body that is SSE after all (mislabelled) is relayed as a stream.
// A body that cannot be read as an answer is still billed, estimated
// from its bytes, and the client gets an error event in its place; a JSON
// object read that is no answer (no choices, usage or error) bills
// nothing.
func (s *Server) relayAnswerAsStream(x *exchange, resp *http.Response, tr provider.Chat, includeUsage bool, model string) {
	body, err := s.readBody(x, resp.Body)
	if err == nil && len(bytes.TrimLeft(body, " \t\r\n")) > 0 && !jsonStart(body) {
		// SSE under a JSON type: read as the stream it is (from the bytes
		// read, so no longer as they arrive).
		resp.Body = io.NopCloser(bytes.NewReader(body))
		s.relayChatStream(x, resp, includeUsage, model, tr)
		return
	}
	err = x.emptyBody(body, err)
	body, ok := x.translateBody(body, err, tr, model)
	if !ok {
		return
	}
	var chunk []byte
	c, err := parseAnswer(body)
	object := err == nil // a JSON object, whatever it holds
	if err == nil && tr == nil {
		var tp openai.ChatTap
		tp.Chunk(c, &x.report)
		x.report.Final = x.report.Reported
	}
	if err == nil && c.Error != nil {
		chunk = s.scrubBytes(x.event.Provider, body) // an error object under a 200: relayed as the error event it is
		x.report.Error, x.report.FinishReason = "upstream error body: "+string(chunk), "error"
		if tr == nil && x.errorUnder200(body) {
			return // the provider's failure, before the client's first byte: the next attempt serves
		}
	} else if err == nil {
		chunk, err = openai.AnswerAsChunk(body)
	}
	switch {
	case err != nil && object && x.noAnswer(body, c):
		// None of it reaches the client, who gets the error event below:
		// it bills nothing (its bytes were billed as output).
		x.report.Error = errNoAnswer
	case err != nil:
		x.unreadableBody(body, err)
	}
	if err != nil {
		chunk = openai.ErrorPayload("upstream_error", "upstream_error",
			"the upstream answered the stream request with a body that is not an answer: "+err.Error())
	}
	out := newChatWriter(x, resp.Header, includeUsage, "chatcmpl-"+x.event.ID, model, x.start.Unix())
	defer out.release()
	if c != nil && c.ID != "" {
		out.id, out.model, out.created = c.ID, c.Model, c.Created
	}
	out.data(chunk)
	out.end(nil)
}

// errNoAnswer is the error of an answer that is a JSON object and no
// answer (exchange.noAnswer, and noAnswerOf on the native routes).
const errNoAnswer = "upstream body not an answer: a JSON object with no output, usage or error"

// noAnswer reports whether body, a JSON object that parseAnswer read as c,
// its usage, error and output tapped into x.report, is no answer at all:
// no choices array, and no usage, error or output read from it (an
// upstream's "{}", a proxy's {"detail":...} under a 200). The provider
// reported producing nothing: as an error object under a 200, it is an
// upstream_error that bills nothing, on a stream request and a
// non-streamed one alike.
func (x *exchange) noAnswer(body []byte, c *openai.Chunk) bool {
	if r := &x.report; r.Reported || r.Error != "" || c.UnreadableUsage || r.Output.Len() > 0 {
		return false
	}
	v, ok, err := jsonscan.Member(body, "choices")
	return err == nil && (!ok || !bytes.HasPrefix(v, []byte("[")))
}

// streamAnswer reports whether body, a non-streamed request's answer that
// parseAnswer could not read, is an SSE stream: its Content-Type says
// text/event-stream, or it starts with an SSE field. An upstream that
// ignored "stream": false sends one.
func streamAnswer(h http.Header, body []byte) bool {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == "text/event-stream" {
		return true
	}
	b := bytes.TrimLeft(body, " \t\r\n")
	for _, field := range [][]byte{[]byte("data:"), []byte("event:"), []byte("id:"), []byte(":")} {
		if bytes.HasPrefix(b, field) {
			return true
		}
	}
	return false
}

// tapStreamAnswer reads body, an answer that came as an SSE stream, into
// r chunk by chunk as the stream relay would: the provider's usage, and
// the output of its chunks for an estimate, not the bytes of its framing
// (read as one unreadable body, a stream's framing was billed as output,
// about 45 times its content). A chunk it cannot read, and any other line
// of the body, is counted as output by its bytes, as the relay counts
// what reaches the client.
func tapStreamAnswer(body []byte, r *tap.Report) {
	rd := sse.NewReader(bytes.NewReader(body))
	var tp openai.ChatTap
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !r.Reported {
				// Read no further (an event past the reader's bound): the
				// whole body by its bytes, as an unreadable answer is.
				r.AddOutputBytes(body)
			}
			break
		}
		r.AddOutputBytes(ev.Other)
		switch {
		case !ev.HasData || isDone(ev.Data):
		case string(ev.Type) == "error":
			r.Error, r.FinishReason = "upstream error event: "+string(ev.Data), "error"
		default:
			c, err := parseAnswer(ev.Data)
			if err != nil {
				r.AddOutputBytes(ev.Data)
				continue
			}
			tp.Chunk(c, r)
		}
	}
}
