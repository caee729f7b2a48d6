package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/meter"
)

// relayChatStream relays an upstream stream to a chat completions client,
// event by event, flushed whenever the next event has not arrived yet (so
// events that arrive together leave in one write, and none waits). With tr nil the upstream speaks OpenAI and
// its chunks pass through; otherwise tr translates them. After the client
// goes away it reads on until the provider's final usage, [DONE] or the end.
func (s *Server) relayChatStream(w http.ResponseWriter, x *exchange, body io.Reader, includeUsage bool, model string, tr chunkStream) {
	out := newChatWriter(w, x, includeUsage, "chatcmpl-"+x.event.ID, model, x.start.Unix())
	defer out.release()
	rd := readers.Get().(*sse.Reader)
	rd.Reset(body)
	defer func() { rd.Reset(nil); readers.Put(rd) }()
	var tap openai.ChatTap
	var payloads [][]byte
	x.armStall()
	var readErr error
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		x.touch()
		if tr != nil {
			payloads = tr.Event(&ev, &x.report, payloads[:0])
			for _, p := range payloads {
				out.data(p)
			}
		} else if out.passOpenAI(&ev, &tap) {
			break // [DONE]
		}
		if !rd.Buffered() {
			out.flush() // the next event is not here yet: send what we have
		}
		if x.clientGone.Load() && x.report.Final {
			break // nobody to send to, and the usage is known
		}
	}
	out.end(readErr)
}

// passOpenAI taps one OpenAI event and forwards it as the client should get
// it. It reports true at data: [DONE], which end sends.
func (c *chatWriter) passOpenAI(ev *sse.Event, tap *openai.ChatTap) (done bool) {
	r := &c.x.report
	if string(ev.Type) == "error" {
		r.Error, r.FinishReason = "upstream error event: "+string(ev.Data), "error"
	}
	if !ev.HasData {
		c.send(*ev) // comments: keep-alives pass
		return false
	}
	if bytes.Equal(ev.Data, doneData) {
		return true
	}
	if s := &c.scan; openai.ScanChunk(ev.Data, s) { // nearly every chunk: no usage, no error
		tap.Scanned(s, r)
		if len(s.ID) > 0 {
			c.setName(s.ID, s.Model, s.Created)
		}
		if !c.includeUsage && s.HasUsageNull() {
			ev.Data = s.StripUsage(ev.Data)
		}
		c.send(*ev)
		return false
	}
	ch, err := openai.ParseChunk(ev.Data)
	if err != nil {
		c.send(*ev) // not ours to judge: pass it on untouched
		return false
	}
	tap.Chunk(ch, r)
	if ch.ID != "" {
		c.id, c.model, c.created = ch.ID, ch.Model, ch.Created
	}
	if ch.UsageOnly() {
		if c.includeUsage && !c.usageSent {
			c.usageSent = true
			c.send(*ev)
		}
		return false
	}
	// Usage rides only in the usage chunk, as OpenAI sends it: a usage
	// report on another chunk is removed (the usage chunk will carry it),
	// and so is "usage":null when the client did not ask for usage.
	if (ch.Usage != nil || !c.includeUsage) && bytes.Contains(ev.Data, usageKey) {
		if stripped, err := sjson.DeleteBytes(ev.Data, "usage"); err == nil {
			ev.Data = stripped
		}
	}
	c.send(*ev)
	return false
}

var usageKey = []byte(`"usage"`)

// readers keeps SSE readers, with their buffers, from one stream to the
// next (a new Reader allocates a 4 KiB buffer).
var readers = sync.Pool{New: func() any { return sse.NewReader(nil) }}

// relayChatBody forwards a non-streamed OpenAI completion unchanged and
// taps its usage.
func (s *Server) relayChatBody(w http.ResponseWriter, x *exchange, resp *http.Response) {
	body, err := s.readBody(x, resp.Body)
	if err != nil {
		status, eventStatus := x.failure()
		x.fail(w, writeError, status, eventStatus, err)
		return
	}
	if c, err := openai.ParseChunk(body); err == nil {
		var tap openai.ChatTap
		tap.Chunk(c, &x.report)
		x.report.Final = x.report.Reported
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(http.StatusOK)
	x.event.HTTPStatus = http.StatusOK
	x.firstByte()
	x.markComplete()
	if _, err := w.Write(body); err != nil {
		x.clientGone.Store(true)
	}
}

// readBody reads a whole upstream body (at most 64 MiB) under the stall timer.
func (s *Server) readBody(x *exchange, body io.Reader) ([]byte, error) {
	x.armStall()
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil && x.cause() != nil {
		err = x.cause()
	}
	return b, err
}

// failure is the status to answer and record for an upstream that failed
// after its headers: 504 and timeout when it stalled, else 502.
func (x *exchange) failure() (int, string) {
	if errors.Is(x.cause(), errStalled) {
		return http.StatusGatewayTimeout, meter.StatusTimeout
	}
	return http.StatusBadGateway, meter.StatusUpstreamError
}
