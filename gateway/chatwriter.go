package gateway

import (
	"errors"
	"net/http"
	"sync"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/meter"
)

var doneData = []byte("[DONE]")

// chatWriter writes a chat.completion.chunk stream to the client. The
// response headers wait for the first event, so that an upstream that
// stalls before it can still be answered with 504. Whatever the upstream
// did, the stream ends the OpenAI way: the usage chunk ("choices":[]) if
// the client asked for usage, then data: [DONE].
type chatWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	x            *exchange
	includeUsage bool
	started      bool
	usageSent    bool
	doneSent     bool
	// id, model and created of the last chunk, for a synthesized usage chunk.
	id, model string
	created   int64
	buf       []byte
	unflushed bool // written since the last flush
	scan      openai.ChunkScan
}

// newChatWriter writes to w. id, model and created name the stream's
// chunks until the upstream's own chunks name them. It comes from a pool,
// with the buffers of an earlier stream: release returns it.
func newChatWriter(w http.ResponseWriter, x *exchange, includeUsage bool, id, model string, created int64) *chatWriter {
	c := chatWriters.Get().(*chatWriter)
	buf, scan := c.buf, c.scan
	*c = chatWriter{w: w, rc: http.NewResponseController(w), x: x, includeUsage: includeUsage,
		id: id, model: model, created: created, buf: buf[:0], scan: scan}
	return c
}

var chatWriters = sync.Pool{New: func() any { return new(chatWriter) }}

// release returns c to the pool; it must not be used after.
func (c *chatWriter) release() {
	buf, scan := c.buf, c.scan
	*c = chatWriter{buf: buf[:0], scan: scan}
	chatWriters.Put(c)
}

// setName records the id, model and created of an upstream chunk (the
// scanned bytes), allocating only when they change.
func (c *chatWriter) setName(id, model []byte, created int64) {
	if string(id) != c.id {
		c.id = string(id)
	}
	if string(model) != c.model {
		c.model = string(model)
	}
	c.created = created
}

// send writes one event; flush sends it. After the client has gone it does
// nothing: the relay reads on for the usage.
func (c *chatWriter) send(ev sse.Event) {
	if c.x.clientGone.Load() {
		return
	}
	if !c.started {
		c.started = true
		h := c.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		c.w.WriteHeader(http.StatusOK)
		c.x.event.HTTPStatus = http.StatusOK
	}
	if ev.HasData {
		c.x.firstByte()
	}
	c.buf = sse.AppendEvent(c.buf[:0], ev)
	if _, err := c.w.Write(c.buf); err != nil {
		c.x.clientGone.Store(true)
		return
	}
	c.unflushed = true
}

// flush sends what send wrote to the client.
func (c *chatWriter) flush() {
	if !c.unflushed || c.x.clientGone.Load() {
		return
	}
	c.unflushed = false
	if err := c.rc.Flush(); err != nil {
		c.x.clientGone.Store(true)
	}
}

func (c *chatWriter) data(p []byte) { c.send(sse.Event{Data: p, HasData: true}) }

// end finishes the stream: an error when the upstream stalled or broke, the
// usage chunk when asked for, and [DONE].
func (c *chatWriter) end(readErr error) {
	x := c.x
	cause := x.cause()
	if !c.started && !x.clientGone.Load() {
		switch {
		case errors.Is(cause, errStalled):
			x.fail(c.w, writeError, http.StatusGatewayTimeout, meter.StatusTimeout, cause)
			return
		case readErr != nil:
			x.fail(c.w, writeError, http.StatusBadGateway, meter.StatusUpstreamError, readErr)
			return
		}
	}
	switch {
	case errors.Is(cause, errStalled):
		x.report.Error = cause.Error()
		c.data(errorPayload("upstream_timeout", "the upstream provider stalled: "+cause.Error()))
	case readErr != nil && cause == nil:
		x.report.Error = "upstream stream broke: " + readErr.Error()
		c.data(errorPayload("upstream_error", x.report.Error))
	}
	if c.includeUsage && !c.usageSent {
		u, _ := x.report.Resolve(x.s.est, x.promptText)
		c.data(openai.AppendUsageChunk(nil, c.id, c.model, c.created, u))
	}
	if !c.doneSent {
		if readErr == nil && cause == nil {
			x.markComplete()
		}
		c.data(doneData)
	}
	c.flush()
}

// errorPayload is an OpenAI error frame's JSON.
func errorPayload(code, msg string) []byte {
	b := []byte(`{"error":{"message":`)
	b = openai.AppendString(b, msg)
	b = append(b, `,"type":"upstream_error","code":`...)
	b = openai.AppendString(b, code)
	return append(b, "}}"...)
}
