package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/meter"
)

var doneData = []byte("[DONE]")

// clientWriter writes to the client until the first failure, then marks the
// client gone and discards the rest; the relay keeps reading upstream.
type clientWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	x     *exchange
	wrote bool
}

func (c *clientWriter) send(b []byte) {
	if c.x.clientGone.Load() {
		return
	}
	if !c.wrote {
		c.wrote = true
		c.x.event.TTFTMillis = time.Since(c.x.start).Milliseconds()
	}
	if _, err := c.w.Write(b); err != nil {
		c.x.clientGone.Store(true)
		return
	}
	if err := c.rc.Flush(); err != nil {
		c.x.clientGone.Store(true)
	}
}

// relayStream forwards an OpenAI-compatible SSE stream event by event,
// flushing each, while it taps the usage. Usage reaches the client only when
// it asked for it (stream_options.include_usage); everything else passes
// through in content and order.
func (s *Server) relayStream(ctx context.Context, w http.ResponseWriter, x *exchange, body io.Reader, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	x.event.HTTPStatus = http.StatusOK
	out := &clientWriter{w: w, rc: http.NewResponseController(w), x: x}
	if err := out.rc.Flush(); err != nil { // headers now: the client sees the stream open
		x.clientGone.Store(true)
	}

	rd := sse.NewReader(body)
	var buf []byte
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.streamEnded(ctx, x, err)
			}
			return
		}
		if ev.HasData && bytes.Equal(ev.Data, doneData) {
			out.send(sse.AppendEvent(buf[:0], ev))
			return
		}
		if string(ev.Type) == "error" {
			x.event.Status, x.event.Error = meter.StatusUpstreamError, "upstream error event: "+string(ev.Data)
		}
		if ev.HasData {
			if data, forward := s.tapChunk(x, ev.Data, includeUsage); forward {
				ev.Data = data
			} else {
				continue
			}
		}
		buf = sse.AppendEvent(buf[:0], ev)
		out.send(buf)
	}
}

// tapChunk reads usage, finish reason, model and errors from one chunk, and
// returns the chunk as the client should get it, or forward=false to drop it.
func (s *Server) tapChunk(x *exchange, data []byte, includeUsage bool) (out []byte, forward bool) {
	c, err := openai.ParseChunk(data)
	if err != nil {
		return data, true // not ours to judge: pass it on untouched
	}
	if c.Model != "" {
		x.event.ServedModel = c.Model
	}
	if fr := c.FinishReason(); fr != "" {
		x.event.FinishReason = fr
	}
	if c.Error != nil {
		x.event.Status, x.event.Error = meter.StatusUpstreamError, "upstream error frame: "+string(c.Error)
	}
	if c.Usage != nil {
		// Usage may be repeated, cumulative: the last report is the total.
		x.event.Usage = c.Usage.Meter()
		x.usageSeen = true
	}
	if includeUsage || !bytes.Contains(data, usageKey) {
		return data, true
	}
	// The client did not ask for usage: the gateway asked upstream for it,
	// so the client gets the stream it would have got without asking: no
	// usage chunk, and no usage key (not even "usage":null) on other chunks.
	if c.UsageOnly() {
		return nil, false
	}
	if stripped, err := sjson.DeleteBytes(data, "usage"); err == nil {
		return stripped, true
	}
	return data, true
}

var usageKey = []byte(`"usage"`)

// streamEnded records why a stream ended early.
func (s *Server) streamEnded(ctx context.Context, x *exchange, err error) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errDrainTimeout):
		x.event.Error = cause.Error()
	case x.clientGone.Load():
	default:
		x.event.Status, x.event.Error = meter.StatusUpstreamError, "upstream stream broke: "+err.Error()
	}
}

// relayBody forwards a non-streamed completion unchanged and reads its usage.
func (s *Server) relayBody(w http.ResponseWriter, x *exchange, resp *http.Response) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		s.failBeforeResponse(w, x, http.StatusBadGateway, meter.StatusUpstreamError, err)
		return
	}
	if c, err := openai.ParseChunk(body); err == nil {
		x.event.ServedModel = c.Model
		x.event.FinishReason = c.FinishReason()
		if c.Usage != nil {
			x.event.Usage, x.usageSeen = c.Usage.Meter(), true
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(http.StatusOK)
	x.event.HTTPStatus = http.StatusOK
	x.event.TTFTMillis = time.Since(x.start).Milliseconds()
	if _, err := w.Write(body); err != nil {
		x.clientGone.Store(true)
	}
}
