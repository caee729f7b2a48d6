package gateway

import (
	"bytes"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// chatWriter writes a chat.completion.chunk stream to the client through
// its exchange. The response headers wait for the first event, so that an
// upstream that stalls before it can still be answered with 504. Whatever
// the upstream did, the stream ends the OpenAI way: the usage chunk
// ("choices":[]) if the client asked for usage, then data: [DONE]; and the
// event is durable before that end is sent.
type chatWriter struct {
	x            *exchange
	upstream     http.Header // the upstream response's headers
	includeUsage bool
	started      bool
	// usage is the upstream's last usage chunk (its data), held back to
	// be sent once the event is durable.
	usage []byte
	// id, model and created of the last chunk, for a synthesized usage chunk.
	id, model string
	created   int64
	// broken is set by passOpenAI on a chunk it could not meter: the
	// stream ends there as an upstream that broke.
	broken error
	// up is the upstream event being relayed (the relay's), nil outside
	// the relay's loop. When its tap found an error in the stream's first
	// event, before anything was sent, send asks x.errorUnder200 whether it
	// is the provider's failure that another attempt takes over: gaveWay
	// then, and nothing is sent.
	up      *sse.Event
	gaveWay bool
	// heldSince is when the first upstream event that became no chunk
	// came, while nothing was sent (see beginAfterWait).
	heldSince time.Time
	// erred says the stream's first error (x.report.Error) was seen, and
	// its deployment's failure judged (exchange.errorFrame).
	erred bool
	// tr is the stream's translation, when the upstream speaks another
	// protocol: end sends what it held back for the end
	// (provider.ChunkStreamEnd).
	tr provider.ChunkStream
	// batch holds the events sent since the last flush (from batches,
	// only while it holds some): the client's writer gets them in one
	// write per flush, not one per event.
	batch *[]byte
	scan  *openai.ChunkScan // its own, kept with it in the pool: copied by value, it took a stream's stack past 8 KiB
	// bodyRead says the upstream's body was read to its end with the
	// stream's own end: end leaves its last write unflushed, for the
	// handler's return to send with the response body's end.
	bodyRead bool
}

// maxBatch is the most a chatWriter holds before it writes, in bytes,
// when the upstream keeps events coming faster than the stream flushes.
const maxBatch = 32 << 10

// batches holds the chatWriters' batch buffers (*[]byte): a stream holds
// one only between an event and the flush that sends it, so an idle stream
// holds none.
var batches = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// newChatWriter writes to x's client. id, model and created name the
// stream's chunks until the upstream's own chunks name them. It comes from
// a pool, with the buffers of an earlier stream: release returns it.
func newChatWriter(x *exchange, upstream http.Header, includeUsage bool, id, model string, created int64) *chatWriter {
	c := chatWriters.Get().(*chatWriter)
	scan, held := c.scan, c.usage
	*c = chatWriter{x: x, upstream: upstream, includeUsage: includeUsage, id: id, model: model, created: created,
		scan: scan, usage: held[:0]}
	return c
}

var chatWriters = sync.Pool{New: func() any { return &chatWriter{scan: new(openai.ChunkScan)} }}

// release returns c to the pool; it must not be used after.
func (c *chatWriter) release() {
	c.putBatch()
	scan, held := c.scan, c.usage
	*c = chatWriter{scan: scan, usage: held[:0]}
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
	x := c.x
	if c.gaveWay {
		return
	}
	if !c.started {
		if c.up != nil && x.errorUnder200(eventError(c.up)) {
			c.gaveWay = true
			return
		}
		c.started = true
		x.respond(http.StatusOK, true, func(h http.Header) {
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			passHeaders(h, c.upstream)
		})
	}
	if !c.erred && c.up != nil && x.report.Error != "" {
		c.erred = true
		x.errorFrame(c.up) // the upstream's error, sent: its deployment may have failed
	}
	if ev.HasData {
		x.firstByte()
	}
	if c.batch == nil {
		c.batch = batches.Get().(*[]byte)
	}
	*c.batch = sse.AppendEvent(*c.batch, ev)
	if len(*c.batch) >= maxBatch {
		x.write(*c.batch)
		*c.batch = (*c.batch)[:0]
	}
}

// flush sends what send wrote to the client.
func (c *chatWriter) flush() {
	if c.batch == nil {
		return
	}
	if len(*c.batch) > 0 {
		c.x.write(*c.batch)
	}
	c.putBatch()
	c.x.flush()
}

// putBatch returns the batch buffer to batches (one grown past maxBatch
// twice over is dropped).
func (c *chatWriter) putBatch() {
	if c.batch == nil {
		return
	}
	if cap(*c.batch) <= 2*maxBatch {
		*c.batch = (*c.batch)[:0]
		batches.Put(c.batch)
	}
	c.batch = nil
}

func (c *chatWriter) data(p []byte) { c.send(sse.Event{Data: p, HasData: true}) }

// passOpenAI taps one OpenAI event and forwards it as the client should get
// it. It reports true at data: [DONE], which end sends.
func (c *chatWriter) passOpenAI(ev *sse.Event, tp *openai.ChatTap) (done bool) {
	r := &c.x.report
	if len(ev.Other) > 0 {
		if t := bytes.TrimSpace(ev.Other); len(t) > 0 && (t[0] == '{' || t[0] == '[') && bytes.Contains(t, []byte(`"error"`)) {
			// A raw JSON error body inside the stream (Vertex-style): an
			// upstream error, its text no output, and scrubbed as error
			// frames are.
			if r.Error == "" {
				r.Error, r.FinishReason = "upstream error: "+string(t[:min(len(t), 1024)]), "error"
			}
			ev.Other = c.x.s.scrubBytes(c.x.event.Provider, ev.Other)
		} else {
			// Other lines reach the client as they came: what reaches it is
			// never free (a plain-text or compressed body sent as a stream
			// is counted, not billed nothing).
			r.AddOutputBytes(ev.Other)
		}
	}
	if string(ev.Type) == "error" {
		r.Error, r.FinishReason = "upstream error event: "+string(ev.Data), "error"
		ev.Data = c.x.s.scrubBytes(c.x.event.Provider, ev.Data)
	}
	if !ev.HasData {
		c.send(*ev) // comments: keep-alives pass
		return false
	}
	if isDone(ev.Data) {
		return true
	}
chunk:
	if s := c.scan; openai.ScanChunk(ev.Data, s) { // every chunk without an error, usage included
		tp.Scanned(s, r)
		if len(s.ID) > 0 {
			c.setName(s.ID, s.Model, s.Created)
		}
		if s.UsageOnly() && string(ev.Type) != "error" { // an error event is relayed, its usage stripped (below)
			if c.includeUsage {
				c.usage = append(c.usage[:0], ev.Data...) // sent by end, once durable
			}
			return false
		}
		// As below: usage rides only in the usage chunk.
		if s.HasUsage() {
			c.usage = c.usage[:0] // a later report: end makes the usage chunk from the event
		}
		if s.HasUsage() || !c.includeUsage && s.HasUsageNull() {
			ev.Data = s.StripUsage(ev.Data)
		}
		c.send(*ev)
		return false
	}
	ch, err := openai.ParseChunk(ev.Data)
	lenient := err != nil
	if lenient {
		if shallow(ev) {
			goto chunk // not a call: the relay's frame stays small (TestStreamStack)
		}
		ch, err = openai.ParseChunkLenient(ev.Data) // a field of another type: what reaches the client is counted
	}
	if errors.Is(err, openai.ErrTooComplex) {
		c.broken = err // not decoded, so not counted: the stream ends as broken
		return false
	}
	if err == nil && ch.AmbiguousUsage {
		// Decoders differ on its usage: as for a chunk read leniently, the
		// usage chunk is made from the event, and usage members stripped.
		lenient = true
	}
	if err != nil {
		r.AddOutputBytes(ev.Data) // no JSON object: passed on untouched, and counted as output
		// But for one the body's end cut short (counted all the same): sent
		// as an event, it was a chunk the client's SDK failed to decode,
		// before the stream's cut-short error after it (a gateway probe).
		if !ev.Unended {
			c.send(*ev)
		}
		return false
	}
	tp.Chunk(ch, r)
	if ch.UnreadableUsage {
		// No report (the usage is estimated), and not the client's: a usage
		// chunk is dropped, a usage member stripped.
		if len(ch.Choices) == 0 && ch.Error == nil {
			return false
		}
		if stripped, err := jsonscan.DeleteMember(ev.Data, "usage"); err == nil {
			ev.Data = stripped
		}
	}
	if ch.ID != "" {
		c.id, c.model, c.created = ch.ID, ch.Model, ch.Created
	}
	if ch.Error != nil {
		ev.Data = c.x.s.scrubBytes(c.x.event.Provider, ev.Data)
	}
	if ch.UsageOnly() && string(ev.Type) != "error" {
		if c.includeUsage && !lenient {
			c.usage = append(c.usage[:0], ev.Data...) // sent by end, once durable
		} else {
			c.usage = c.usage[:0] // end makes it from the event: the client's SDK would not read this one either
		}
		return false
	}
	// Usage rides only in the usage chunk, as OpenAI sends it: a usage
	// report on another chunk is removed (the usage chunk will carry it),
	// and so is "usage":null when the client did not ask for usage. The
	// member goes under whatever key encoding/json read it from ("Usage",
	// "us\u0061ge"), as a client's decoder may read it the same way; a
	// chunk that could not spell it so is not parsed again. A report on it
	// is later than a usage chunk held: end makes the usage chunk from the
	// event instead.
	if ch.Usage != nil {
		c.usage = c.usage[:0]
	}
	if (ch.Usage != nil || !c.includeUsage || ch.AmbiguousUsage) && jsonscan.MayHaveMember(ev.Data, "usage") {
		if stripped, err := jsonscan.DeleteMember(ev.Data, "usage"); err == nil {
			ev.Data = stripped
		}
	}
	c.send(*ev)
	return false
}

// shallow replaces ev's data, when it holds JSON nested past
// encoding/json's 10,000 levels (a hostile upstream's member beside the
// chunk's own), by its members within jsonscan.MaxDepth levels
// (jsonscan.Shallow), as it is read and relayed, and reports whether it
// did. Not inlined: the relay's frame stays small (TestStreamStack).
//
//go:noinline
func shallow(ev *sse.Event) bool {
	data, ok := jsonscan.Shallow(ev.Data)
	ev.Data = data
	return ok
}

// end finishes the stream: an error when the upstream stalled or broke;
// then the event is made durable; then the usage chunk when asked for,
// and [DONE].
func (c *chatWriter) end(readErr error) {
	x := c.x
	c.up = nil // what end sends is the gateway's own
	cause := x.cause()
	if !c.started && !x.clientGone.Load() {
		switch {
		case errors.Is(cause, errStalled):
			x.failedBeforeOutput(cause)
			x.fail(http.StatusGatewayTimeout, usage.StatusTimeout, cause)
			return
		case readErr != nil:
			x.failedBeforeOutput(readErr)
			x.fail(http.StatusBadGateway, usage.StatusUpstreamError, readErr)
			return
		}
	}
	if c.tr != nil {
		c.heldForEnd() // before an error chunk of the gateway's
	}
	switch {
	case errors.Is(cause, errStalled):
		x.report.Error = cause.Error()
		x.brokeAfterStart(cause)
		// The cause says which bound: stall_timeout, or request_timeout.
		c.data(openai.ErrorPayload("upstream_error", "upstream_timeout", "upstream timeout: "+cause.Error()))
	case readErr != nil && cause == nil:
		x.brokeAfterStart(nil)
		x.report.Error = "upstream stream broke: " + x.s.scrubFor(x.event.Provider, upstreamErrorText(readErr))
		c.data(openai.ErrorPayload("upstream_error", "upstream_error", x.report.Error))
	}
	if readErr == nil && (cause == nil || errors.Is(cause, errQuietAfterUsage)) {
		x.markComplete()
	}
	c.flush()  // what is written goes now: the commit holds back only the end
	x.commit() // durable before the client learns the usage and the end
	if x.undurable {
		c.data(heldBack)
		c.flush()
		return
	}
	if c.includeUsage {
		if len(c.usage) > 0 && reportedAsBilled(x.event) {
			c.data(x.withCost(c.usage))
		} else {
			object := "chat.completion.chunk"
			if x.event.Endpoint == "/v1/completions" {
				object = "text_completion" // the legacy stream's chunks, its usage chunk too
			}
			c.data(x.withCost(openai.AppendUsageChunk(nil, object, c.id, c.model, c.created, x.event.Usage)))
		}
	}
	c.data(doneData)
	if c.bodyRead {
		c.leave()
		return
	}
	c.flush()
}

// leave writes what send wrote without flushing it: the handler returns at
// once (the upstream's body has ended: readToEnd has nothing to wait for),
// and net/http, or a taken connection's end, sends it in one write with
// the response body's end, where a flush took a write of its own
// (BENCHMARKS.md, "Issue 16, stop 63").
func (c *chatWriter) leave() {
	if c.batch == nil {
		return
	}
	if len(*c.batch) > 0 {
		c.x.write(*c.batch)
	}
	c.putBatch()
}

// heldForEnd sends what the stream's translation held back for its end
// (provider.ChunkStreamEnd), before the usage chunk and [DONE], after its
// first chunk when nothing was sent (provider.ChunkStreamBegin). A function
// of its own, kept out of end's frame.
//
//go:noinline
func (c *chatWriter) heldForEnd() {
	if b, ok := c.tr.(provider.ChunkStreamBegin); ok && !c.started {
		// A stream that ends with nothing sent (no output): its first
		// chunk still opens it, before the commit, so that the event
		// records the response the client gets.
		for _, p := range b.Begin(nil) {
			c.data(p)
		}
	}
	if e, ok := c.tr.(provider.ChunkStreamEnd); ok {
		for _, p := range e.End(&c.x.report, nil) {
			c.data(p)
		}
	}
}

// reportedAsBilled reports whether the upstream's own usage chunk says
// what e bills: e's counts are the provider's (usage_source upstream) and
// neither Normalize nor the gateway changed any of them. Otherwise the
// client is sent e's counts, not a report that the bill contradicts (a
// completion the report did not count, estimated; a cached count clamped
// to the prompt; reasoning counted apart from the completion).
func reportedAsBilled(e *usage.Event) bool {
	return e.UsageSource == usage.SourceUpstream && !usage.HasCorrection(e.Corrections, usage.CorrectionNegative) &&
		!usage.HasCorrection(e.Corrections, usage.CorrectionOverMax) && !usage.HasCorrection(e.Corrections, usage.CorrectionCacheOverPrompt) &&
		!usage.HasCorrection(e.Corrections, usage.CorrectionReasoningOutsideCompletion)
}
