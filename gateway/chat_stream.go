package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
)

var doneData = []byte("[DONE]")

// isDone reports whether data ends an OpenAI stream: as OpenAI's SDKs read
// it, any data that begins with [DONE] (openai-python: `if
// sse.data.startswith("[DONE]")`; openai-node likewise). Read as equal to
// it, an upstream's "[DONE] " (a trailing space) was relayed as a chunk,
// billed as output, and the usage chunk the client asked for followed it,
// where its SDK never reads (a review).
func isDone(data []byte) bool { return bytes.HasPrefix(data, doneData) }

// errorChunk starts the error payload a translator makes of an upstream
// error (anthropic.Stream, gemini.Stream).
var errorChunk = []byte(`{"error":`)

// relayBodyInStream answers by relayAnswerAsStream a stream whose first
// lines (other, as rd read them) are no SSE fields but a JSON body: the
// body is those lines and what rd has not read. It is a function of its
// own so that relayChatStream's frame, kept for a stream's life, does not
// hold what this rare case needs (see headerFlusher).
//
//go:noinline
func (s *Server) relayBodyInStream(x *exchange, resp *http.Response, rd *sse.Reader, other []byte, chat provider.Chat, includeUsage bool, model string) {
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(append(bytes.Clone(other), '\n')), rd.Rest()), resp.Body}
	s.relayAnswerAsStream(x, resp, chat, includeUsage, model)
}

// heldBack is the error a stream sends in place of its usage and its end
// when its event could not be made durable (exchange.undurable): "durable
// before done" holds, and the client knows the request did not end well.
var heldBack = openai.ErrorPayload("server_error", "metering_unavailable",
	"the gateway could not record this request's usage durably (its event stream and its crash journal both failed): "+
		"the usage and the end of the stream are withheld")

// errNoData ends a stream whose upstream closed it cleanly before any data
// event (no chunk, no [DONE]): nothing was served, so it is an upstream
// error (502 when nothing was sent yet, a failover's next attempt when
// there is one) that bills nothing, not a completion with an estimated
// prompt.
var errNoData = errors.New("the upstream stream ended before any data")

// errEmptyBody is errNoData's like for a whole body: an upstream that
// answered 200 with nothing in its body (whitespace at most) served
// nothing, so it failed before any output: 502, or the next attempt.
var errEmptyBody = errors.New("the upstream answered 200 with an empty body")

// emptyBody returns errEmptyBody, recorded as a failure before any
// output (which bills nothing), when body, read without error, holds
// nothing; else err.
func (x *exchange) emptyBody(body []byte, err error) error {
	if err == nil && len(bytes.TrimSpace(body)) == 0 {
		x.failedBeforeOutput(errEmptyBody)
		return errEmptyBody
	}
	return err
}

// errCutShort ends a stream whose upstream closed it cleanly after data
// but before its end: no finish_reason on any choice, no final usage
// report, no [DONE] (nor Anthropic's message_stop). The protocol ends
// every completed stream with one of them (DESIGN: some providers never
// send [DONE], and end at the finish chunk, which stays a clean end), so
// the answer was cut short upstream: recorded as a stream that broke,
// an upstream error with the relayed output billed, and the client told
// in an error chunk instead of a [DONE] that says it is complete.
var errCutShort = errors.New("the upstream stream ended before its finish_reason or [DONE]: cut short")

// relayChatStream relays an upstream stream to a chat completions client,
// event by event, flushed whenever the next event has not arrived yet (so
// events that arrive together leave in one write, and none waits). With
// chat nil the upstream speaks OpenAI and its chunks pass through;
// otherwise chat's stream translates them. After the client goes away it
// reads on until the provider's final usage, [DONE] or the end. A body
// that is a whole JSON answer, whatever its Content-Type says (its first
// line starts with '{' or '[', which no SSE field does), is answered by
// relayAnswerAsStream: as an SSE stream it would hold no event, and what
// the client got would be billed nothing.
func (s *Server) relayChatStream(x *exchange, resp *http.Response, includeUsage bool, model string, chat provider.Chat) {
	var tr provider.ChunkStream
	if chat != nil {
		tr = chat.NewStream("chatcmpl-"+x.event.ID, model, x.start.Unix())
	}
	out := newChatWriter(x, resp.Header, includeUsage, "chatcmpl-"+x.event.ID, model, x.start.Unix())
	out.tr = tr
	defer out.release()
	rd := readers.Get().(*sse.Reader)
	rd.Reset(resp.Body)
	defer func() { rd.Reset(nil); readers.Put(rd) }()
	first := true
	var tp openai.ChatTap
	var payloads [][]byte
	x.armStall()
	var readErr error
	done, sawData := false, false
	var ev sse.Event // one for the stream: its address escapes (a new one per event was a heap allocation each)
	out.up = &ev
	var quiet *time.Timer
	// restFor is the report (tap.Report.Reports) the relay last armed or
	// renewed x.rest for, its client gone; -1 before it has.
	restFor := -1
	known := false // the usage is known (x.usageKnown, kept here too so that no chunk loads it)
	for {
		var err error
		ev, err = rd.Next()
		if err != nil {
			switch {
			case !errors.Is(err, io.EOF):
				readErr = err
			case !sawData:
				readErr = errNoData
			case !x.report.Ended && !x.report.Final && x.report.FinishReason == "" && x.report.Error == "":
				readErr = errCutShort
			}
			break
		}
		x.touch()
		if blankEvent(&ev) {
			continue // whitespace lines: nothing to relay, nor a reason to begin the response
		}
		sawData = sawData || ev.HasData
		if first && !ev.HasData && jsonStart(ev.Other) {
			s.relayBodyInStream(x, resp, rd, ev.Other, chat, includeUsage, model)
			return
		}
		first = false
		if tr != nil {
			payloads = tr.Event(&ev, &x.report, payloads[:0])
			if len(payloads) == 0 && !out.started && ev.HasData && x.report.Error == "" {
				payloads = out.beginAfterWait(payloads)
			}
			for _, p := range payloads {
				if bytes.HasPrefix(p, errorChunk) { // an upstream error, which may echo its key or address
					p = s.scrubBytes(x.event.Provider, p)
				}
				out.data(p)
			}
		} else if out.passOpenAI(&ev, &tp) {
			done = true
			break // [DONE]
		} else if out.broken != nil {
			readErr = out.broken
			break
		} else if settled := tp.Settled(); settled != (quiet != nil) {
			quiet = x.quietAfterUsage(quiet, settled)
		}
		x.report.StreamEvent(ev.HasData) // a refusal clears Began: the attempt given way bills nothing
		if out.gaveWay {
			break // the first event was the provider's failure: the next attempt serves
		}
		x.progress()
		if x.report.Ended {
			done = true
			break // the provider's own end (Anthropic's message_stop)
		}
		if tr != nil && (quiet != nil || x.report.Final) {
			quiet = x.quietAfterReport(quiet)
		}
		if !rd.Buffered() && !rd.Cut() {
			out.flush() // the next event is not here yet, nor on its way: send what we have
			x.waiting()
		}
		// The usage is known once its report is final, and every choice's:
		// with one choice, once it has finished (a choices-less report
		// before is a progress report); with n > 1, once settled.
		if k := x.report.Final && !x.report.Cumulative && (tr != nil || x.oneChoice && tp.ReportedAfterFinish() || tp.Settled()); k != known {
			known = k
			x.usageKnown.Store(k)
		}
		if known && x.clientGone.Load() && x.report.Reports != restFor {
			// Nobody to send to: a repeat of the report, or the end, may
			// follow within afterUsageWait of it.
			restFor = x.report.Reports
			x.renewRest()
		}
	}
	if quiet != nil {
		quiet.Stop()
	}
	x.stopRest()
	if out.gaveWay {
		return // nothing was written: the exchange's end retires its event
	}
	if c := x.cause(); errors.Is(c, errQuietAfterUsage) || errors.Is(c, errQuietAfterError) || errors.Is(c, errUsageKnown) || errors.Is(c, errUsageKnownNoSlot) {
		readErr = nil // the end, as a [DONE] would have said; or all that was to be read
	}
	out.bodyRead = done && rd.SourceEnded()
	out.end(readErr)
	if done {
		x.readToEnd(resp.Body)
	}
}

// beginAfterWait is called for an upstream event that became no chunk
// while nothing was sent. It appends to dst, once maxHeadWait has passed
// since the first such event (as the native route counts its held
// events' wait), the first chunk the translation holds back until the
// first output (provider.ChunkStreamBegin: the role chunk), so that a
// model slow to begin (Anthropic pings meanwhile) gives the client the
// response's headers and a first chunk. Not inlined: the relay's frame
// stays small (TestStreamStack).
//
//go:noinline
func (c *chatWriter) beginAfterWait(dst [][]byte) [][]byte {
	b, ok := c.tr.(provider.ChunkStreamBegin)
	switch {
	case !ok:
	case c.heldSince.IsZero():
		c.heldSince = time.Now()
	case time.Since(c.heldSince) >= maxHeadWait:
		return b.Begin(dst)
	}
	return dst
}

// quietAfterUsage arms, once an OpenAI stream is settled (its usage chunk
// came after every choice's end: openai.ChatTap.Settled), a wait of
// afterUsageWait for the rest, [DONE] alone by the protocol: an upstream
// that holds its body open after its usage chunk (DESIGN: some never send
// [DONE]; the stream ends at the finish chunk) ends cleanly then, rather
// than holding the client for stall_timeout and ending in an error the
// upstream never sent. A choice that comes after stops the wait. It
// returns the timer armed, or nil.
func (x *exchange) quietAfterUsage(t *time.Timer, settled bool) *time.Timer {
	switch {
	case settled && t == nil:
		return timerCancel(x, afterUsageWait, errQuietAfterUsage)
	case !settled && t != nil:
		t.Stop()
		return nil
	}
	return t
}

// quietAfterReport arms, at each final report that is not cumulative
// (Anthropic's message_delta, on the native route or translated), a wait
// of afterUsageWait for the stream's end, which only the protocol's end
// event may be, pings aside: an upstream that holds its body open after
// the report ends cleanly then, as an OpenAI stream does after its usage
// chunk (quietAfterUsage), rather than holding the client for
// stall_timeout, or for request_timeout with pings, and ending in an
// error the upstream never sent. A repeat of the report renews the wait
// (x.quietFor is the report it was armed for); the client gone or the
// end read stops it (x.rest waits for a client gone). It returns the
// timer armed, t, or nil. Not inlined, and its state in x: the relay's
// frame, which an idle stream keeps, stays small (TestStreamStack).
//
//go:noinline
func (x *exchange) quietAfterReport(t *time.Timer) *time.Timer {
	r := &x.report
	switch {
	case x.clientGone.Load() || r.Ended:
		if t != nil {
			t.Stop()
		}
		return nil
	case r.Final && !r.Cumulative && r.Reports != x.quietFor:
		if t != nil {
			t.Stop()
		}
		x.quietFor = r.Reports
		return time.AfterFunc(afterUsageWait, func() {
			if !x.clientGone.Load() { // a client that left while the relay waited: x.rest decides
				x.cancel(errQuietAfterUsage)
			}
		})
	}
	return t
}

// afterUsageWait is how long a settled OpenAI stream waits for [DONE].
const afterUsageWait = time.Second

// blankEvent reports that ev is only blank or whitespace lines (which the
// reader returns as Other): no event at all, as the native routes read it.
func blankEvent(ev *sse.Event) bool {
	return !ev.HasData && !ev.HasComment && !ev.HasID && len(ev.Type) == 0 && len(ev.Retry) == 0 &&
		len(bytes.TrimSpace(ev.Other)) == 0
}

// readers keeps SSE readers, with their buffers, from one stream to the
// next (a new Reader allocates a 1 KiB buffer). An event may be as large
// as a whole answer (maxAnswer), not sse.DefaultMaxEvent's 8 MiB: a
// generated image comes whole in one event, and a larger one broke the
// stream and lost the usage that came with it.
var readers = sync.Pool{New: func() any { return sse.NewReaderSize(nil, maxAnswer) }}
