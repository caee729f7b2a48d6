package sim

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// streamer writes the SSE frames of one streamed response.
type streamer struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	p      *plan
	prefix []byte // `data: {"id":...,"choices":[`
	buf    []byte // the frame being written, reused
	timer  *time.Timer
}

// stream serves a streamed completion and returns its outcome and the usage
// it billed (see the package documentation). On outcomeDisconnected the
// caller must abort the connection.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p *plan) (outcome, Usage) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Request-Id", p.id)
	w.WriteHeader(http.StatusOK)
	st := &streamer{w: w, rc: http.NewResponseController(w), p: p}
	st.prefix = appendChunkPrefix(make([]byte, 0, 192), p)
	st.buf = make([]byte, 0, 512+len(st.prefix))
	ctx := r.Context()

	// Once the first chunk is out, the prompt and all reasoning are billed.
	sent := p.usage
	sent.CompletionTokens = p.usage.ReasoningTokens
	if err := st.chunk(chunkRole, st.cumulative(&sent)); err != nil {
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
				st.buf = appendErrorFrame(st.buf[:0], i)
				if st.write(st.buf) == nil && !p.fault.noDone {
					_ = st.done()
				}
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
		if err := st.content(k, st.cumulative(&next)); err != nil {
			return outcomeCanceled, sent
		}
		sent = next
	}
	if !st.pause(ctx) {
		return outcomeCanceled, sent
	}
	var final *Usage
	if p.fault.cumulative || p.fault.usageInFinish {
		final = &p.usage
	}
	if err := st.chunk(chunkFinish+p.finishReason+`"}]`, final); err != nil {
		return outcomeCanceled, sent
	}
	if p.includeUsage && !p.fault.usageInFinish && !p.fault.noUsage {
		if err := st.chunk("]", &p.usage); err != nil {
			return outcomeCanceled, sent
		}
	}
	if !p.fault.noDone {
		if err := st.done(); err != nil {
			return outcomeCanceled, sent
		}
	}
	return outcomeOK, p.usage
}

// cumulative returns u when every chunk carries the usage so far, else nil.
func (st *streamer) cumulative(u *Usage) *Usage {
	if st.p.fault.cumulative {
		return u
	}
	return nil
}

// chunk writes a chunk frame whose choices are choices (with the closing
// bracket); see end for u.
func (st *streamer) chunk(choices string, u *Usage) error {
	b := append(st.buf[:0], st.prefix...)
	return st.end(append(b, choices...), u)
}

// content writes a content chunk of k tokens; see end for u.
func (st *streamer) content(k int64, u *Usage) error {
	b := append(st.buf[:0], st.prefix...)
	b = append(b, chunkContent...)
	b = appendTokens(b, k)
	return st.end(append(b, chunkContEnd...), u)
}

// end finishes and writes the frame in b with its usage key: u when not nil,
// else "usage":null when include_usage asked for usage, else none; never one
// under no_usage.
func (st *streamer) end(b []byte, u *Usage) error {
	switch {
	case st.p.fault.noUsage:
	case u != nil:
		b = appendUsage(append(b, `,"usage":`...), *u)
	case st.p.includeUsage:
		b = append(b, `,"usage":null`...)
	}
	st.buf = append(b, frameEnd...)
	return st.write(st.buf)
}

// done writes data: [DONE].
func (st *streamer) done() error {
	st.buf = append(st.buf[:0], frameDone...)
	return st.write(st.buf)
}

// write writes and flushes one frame.
func (st *streamer) write(b []byte) error {
	if _, err := st.w.Write(b); err != nil {
		return err
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
