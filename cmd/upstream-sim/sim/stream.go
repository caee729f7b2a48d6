package sim

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// encoder writes one protocol's frames of one streamed response. The
// streamer decides what happens when (chunk plan, pacing, faults, billing);
// the encoder only decides the bytes. Methods that return []byte append to b.
type encoder interface {
	// start appends the frames that open the stream, written at once: they
	// carry all the reasoning; u is the usage billed once they are out.
	// Nothing is appended when the protocol has no opening frame.
	start(b []byte, u Usage) []byte
	// content appends a content chunk of k tokens; u is the usage so far
	// with it; last reports the last chunk of a stream that finishes.
	content(b []byte, k int64, u Usage, last bool) []byte
	// finish writes the frames after the content, each flushed, when
	// finishes says there are any.
	finish(st *streamer) error
	finishes() bool
	// streamError writes the frames of error_after, after content chunks.
	streamError(st *streamer, after int64)
}

// streamer writes the SSE frames of one streamed response.
type streamer struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	p     *plan
	buf   []byte // the frame being written, reused
	timer *time.Timer
}

// stream serves a streamed response and returns its outcome and the usage it
// billed (see the package documentation). On outcomeDisconnected the caller
// must abort the connection.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p *plan, enc encoder) (outcome, Usage) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Request-Id", p.id)
	w.WriteHeader(http.StatusOK)
	st := &streamer{w: w, rc: http.NewResponseController(w), p: p, buf: make([]byte, 0, 1024)}
	ctx := r.Context()

	// Once the opening frames are out, the prompt and all reasoning are billed.
	sent := p.usage
	sent.CompletionTokens = p.usage.ReasoningTokens
	st.buf = enc.start(st.buf[:0], sent)
	if err := st.write(st.buf); err != nil {
		return outcomeCanceled, Usage{}
	}
	if p.fault.kind == faultStall {
		<-ctx.Done()
		return outcomeStalled, sent
	}
	per, extra := p.contentTokens/p.chunks, p.contentTokens%p.chunks
	for i := int64(0); ; i++ {
		if i == p.fault.after {
			switch p.fault.kind {
			case faultDisconnect:
				return outcomeDisconnected, sent
			case faultErrorAfter:
				enc.streamError(st, i)
				return outcomeStreamError, sent
			}
		}
		if i == p.chunks {
			break
		}
		if !st.pause(ctx) {
			return outcomeCanceled, sent
		}
		k := per
		if i < extra {
			k++
		}
		next := sent
		next.CompletionTokens += k
		st.buf = enc.content(st.buf[:0], k, next, p.last(i))
		if err := st.write(st.buf); err != nil {
			return outcomeCanceled, sent
		}
		sent = next
	}
	if enc.finishes() {
		if !st.pause(ctx) {
			return outcomeCanceled, sent
		}
		if err := enc.finish(st); err != nil {
			return outcomeCanceled, sent
		}
	}
	return outcomeOK, p.usage
}

// write writes and flushes b, which may be empty (a flush alone).
func (st *streamer) write(b []byte) error {
	if len(b) > 0 {
		if _, err := st.w.Write(b); err != nil {
			return err
		}
	}
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// pause sleeps sim_delay_ms and reports whether the request is still live.
func (st *streamer) pause(ctx context.Context) bool {
	if st.p.delay <= 0 {
		return ctx.Err() == nil
	}
	if st.timer == nil {
		st.timer = time.NewTimer(st.p.delay)
	} else {
		st.timer.Reset(st.p.delay)
	}
	select {
	case <-st.timer.C:
		return true
	case <-ctx.Done():
		st.timer.Stop()
		return false
	}
}
