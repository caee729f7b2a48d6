package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// native serves one of a provider's own routes: the client speaks the
// provider's protocol and gets the provider's bytes unchanged, metered.
func (s *Server) native(p *provider.Provider, rt *provider.Route, env provider.Envelope) http.HandlerFunc {
	counters := map[int]http.HandlerFunc{}
	for i, c := range p.Counters {
		if c.Pattern == "" && c.Match != nil {
			counters[i] = s.countTokens(p, c, env)
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		for i, serve := range counters {
			if p.Counters[i].Match(r) {
				serve(w, r) // unmetered, though it went through the route's limits
				return
			}
		}
		call, body, ok := s.readCall(w, r, env, rt.Read)
		if !ok {
			return
		}
		route, err := s.routes.resolve(call.Model)
		if err != nil || !route.serves(p.Type) {
			env.WriteError(w, provider.Err(http.StatusNotFound, "invalid_request_error", "model_not_found",
				fmt.Sprintf("the model %q is not served by a provider of type %s here", call.Model, p.Type)))
			return
		}
		if !allowedModel(keyOf(r), call.Model, route) {
			env.WriteError(w, modelNotAllowed(call.Model))
			return
		}
		endUser, tags, err := attribution(r, call.EndUser, call.Metadata)
		if err != nil {
			env.WriteError(w, badRequest(err.Error()))
			return
		}
		key := keyOf(r)
		attempts, err := s.prepareAttempts(key, route, func(model string, d *deployment) bool {
			return d.provider.Type == p.Type && allowedModel(key, model, deploymentRoute(model, d))
		}, func(a attempt) (string, []byte, error) { return call.Upstream(a.dep.upstream) })
		if err != nil {
			env.WriteError(w, attemptsError(err))
			return
		}
		s.serveAttempts(w, r, attempts, call.Endpoint, call.Stream, env, func(x *exchange, at prepared) {
			x.event.EndUser, x.event.Metadata = endUser, tags
			x.promptText = func() tap.Prompt { return rt.PromptText(body) }
			x.begin(body)
			resp := s.callUpstream(x, at.route(), at.path, at.body, call.Header)
			if resp == nil {
				return
			}
			defer resp.Body.Close()
			if call.SSE && jsonAnswer(resp.Header) {
				// A whole body, not the stream asked for; or SSE under a
				// JSON type (mislabelled), read as the stream it is, from
				// the bytes read, as relayAnswerAsStream reads it.
				body, err := s.readBody(x, resp.Body)
				if err == nil && len(bytes.TrimLeft(body, " \t\r\n")) > 0 && !jsonStart(body) {
					resp.Body = io.NopCloser(bytes.NewReader(body))
					s.passThrough(x, at.route(), resp, rt)
					return
				}
				s.relayBody(x, resp, body, err, rt)
				return
			}
			if call.SSE {
				s.passThrough(x, at.route(), resp, rt)
				return
			}
			s.passBody(x, resp, rt)
		})
	}
}

// passThrough relays an upstream SSE stream to the client byte for byte,
// event by event (each event's bytes once the reader has read it whole),
// while the tap of pr (the native route) reads the usage from the same events. The event is made
// durable before the bytes of the event that completes the usage (the
// provider's final report) are sent, so that a client that saw the usage
// was metered. A body with no SSE event in it at all (a whole answer,
// whatever its Content-Type said) is billed from bodyUsage, as passBody
// bills it, or estimated from its bytes: it is relayed, so never free.
// endEvent is pr.EndEvent: with one, a stream that
// ends without it is recorded as cut short; without one, a stream that
// ends before any finish reason is (see streamEnd). billedEnd,
// pr.BilledEnd, when not nil, writes the usage billed into the
// end event of a stream whose usage was not the provider's as it reported
// it (estimated, partly, or corrected: reportedAsBilled).
func (s *Server) passThrough(x *exchange, rt route, resp *http.Response, pr *provider.Route) {
	tp, bodyUsage, endEvent, billedEnd := pr.NewTap(), pr.BodyUsage, pr.EndEvent, pr.BilledEnd
	x.armStall()
	src := &recorder{r: resp.Body}
	rd := readers.Get().(*sse.Reader)
	rd.Reset(src)
	defer func() { rd.Reset(nil); readers.Put(rd) }()
	started := false
	// head is the stream's first data events while none carried output or
	// an error (Anthropic's message_start and pings, the Responses API's
	// response.created), up to maxHeld: held until something else comes,
	// so that a stream refused before any output (an overloaded_error
	// after message_start, Anthropic's usual overload) or broken before
	// it has sent the client nothing, and fails over. They go out first,
	// with the response's headers (start); or with the first event that
	// comes maxHeadWait after the first of them: a model slow to begin
	// (Anthropic pings meanwhile) still gives the client its headers and
	// the keep-alives, for the timeouts of proxies and clients on the way.
	var head []byte
	// headSince is when head's first event came.
	var headSince time.Time
	start := func() { // the response's headers, before its first bytes or a commit
		if !started {
			started = true
			x.respond(http.StatusOK, true, func(h http.Header) { copyHeader(h, resp, "text/event-stream") })
			x.firstByte()
			if len(head) > 0 {
				x.write(head)
				head = nil
			}
		}
	}
	forward := func(b []byte) {
		if len(b) == 0 {
			return
		}
		start()
		x.write(b)
	}
	var ev sse.Event // one for the stream (see relayChatStream)
	known := false   // the usage is known (x.usageKnown, kept here too so that no event loads it)
	restFor := -1    // the report x.rest was last armed for (see relayChatStream)
	// finalUsage is the usage of the last final report let through: after
	// it, no event may lower a count (see lowered below).
	var finalUsage usage.Tokens
	defer x.stopRest()
	// Until the first data event, the bytes forwarded are kept (noData):
	// a body with none is an answer that is not SSE, billed at its end.
	sawData, noData := false, []byte(nil)
	// held is the last chunk of a Cumulative stream once its report looks
	// final: it is final only if the stream ends after it, so it is sent
	// when the next chunk comes or, at the end, once the event is durable.
	// In a stream whose reports are not cumulative, it is the chunk of the
	// final report, sent once the event is durable: at the next event (an
	// error there is the request's), or at the end.
	var held []byte
	// durable sends what is written, then commits the event: what follows
	// (a final report, the end) goes out only if the event is durable;
	// else the stream is broken off, its end withheld.
	durable := func() {
		x.flush()
		x.commit()
		if x.undurable && !x.clientGone.Load() {
			panic(http.ErrAbortHandler)
		}
	}
	// quiet ends the read afterUsageWait after a final report that is not
	// cumulative (Anthropic's message_delta), whatever comes meanwhile
	// (pings): only the protocol's end may follow it (see quietAfterFinal
	// and x.quietAfterReport).
	var quiet *time.Timer
	defer func() {
		if quiet != nil {
			quiet.Stop()
		}
	}()
	for {
		var err error
		ev, err = rd.Next()
		if err != nil && errors.Is(x.cause(), errQuietAfterUsage) {
			err = io.EOF // the upstream held its body open after its final report: that was its end
		}
		if errors.Is(err, io.EOF) {
			rest := src.take(src.n)
			if !sawData && len(bytes.TrimSpace(noData)) == 0 && len(bytes.TrimSpace(rest)) == 0 {
				x.report.Error = errNoData.Error() // an empty body, or only comments: nothing served, nothing billed
				if x.clientGone.Load() {
					return // as on the chat route: an upstream error, named before the client that left
				}
				if !started {
					x.fail(http.StatusBadGateway, usage.StatusUpstreamError, errNoData)
					return
				}
				// Comments were forwarded: the protocol's error event, then
				// abort, so the client sees a broken stream, not a clean
				// end, the event durable first.
				x.brokeAfterStart(nil)
				x.commit()
				forward(x.env.StreamError(provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", errNoData.Error())))
				x.flush()
				panic(http.ErrAbortHandler)
			}
			if end := streamEnd(endEvent, &x.report); sawData && end != "" {
				// The protocol ends every stream with its own event, and
				// this one ended without it, and before the provider's
				// final usage report (Anthropic's message_delta, with the
				// stop reason: what follows it is message_stop alone): cut
				// short upstream, as a stream that broke is (what was
				// relayed is billed, its usage estimated when the provider
				// reported none).
				cut := "upstream stream ended without " + end + ": cut short"
				if !started && len(held) == 0 && !x.clientGone.Load() {
					// Only the events before output came (head, held), and
					// none reached the client: a failure before output, as
					// a stream that broke there (and the chat route's cut
					// stream): 502, or the next attempt.
					err := errors.New(cut)
					x.failedBeforeOutput(err)
					x.fail(http.StatusBadGateway, usage.StatusUpstreamError, err)
					return
				}
				x.report.Error = cut
				x.brokeAfterStart(nil)
			}
			x.markComplete() // every upstream byte is forwarded below
			if (len(held) > 0 || len(head) > 0) && !x.clientGone.Load() {
				start() // the headers (and the time to first byte) before the event is made durable
			}
			x.flush()
			if !sawData {
				noData = append(noData, rest...)
				if !x.report.Reported && x.report.Output.Len() == 0 && len(bytes.TrimSpace(noData)) > 0 {
					if err := bodyUsage(noData, &x.report); err != nil {
						x.unreadableBody(noData, err)
					} else if x.noAnswerOf(noData, pr.Answer) {
						x.report.Error = errNoAnswer
					}
				}
			}
			x.commit()
			if x.undurable { // not durable: the end is withheld, the stream broken
				x.flush()
				panic(http.ErrAbortHandler)
			}
			forward(held)
			forward(rest)
			x.flush()
			return
		}
		if err != nil {
			// A held chunk was received whole and its usage taken into the
			// report: it is output, delivered before the stream is broken.
			if !started && len(held) == 0 && !x.clientGone.Load() {
				status, eventStatus := x.failure()
				x.failedBeforeOutput(err)
				x.fail(status, eventStatus, err)
				return
			}
			var frame []byte // the error event the client gets, when the break is the gateway's to report
			if x.report.Error == "" {
				switch cause := x.cause(); {
				case errors.Is(cause, errStalled):
					x.report.Error = cause.Error()
					x.brokeAfterStart(cause)
					frame = x.env.StreamError(provider.Err(http.StatusGatewayTimeout, "upstream_error", "upstream_timeout",
						"upstream timeout: "+cause.Error()))
				case cause == nil: // not our own cancellation (the client gone, a drain's end)
					x.report.Error = "upstream stream broke: " + s.scrubFor(rt.provider.Name, upstreamErrorText(err))
					x.brokeAfterStart(nil)
					frame = x.env.StreamError(provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", x.report.Error))
				}
			}
			if x.clientGone.Load() {
				return
			}
			// The stream ends with the protocol's own error event (as the
			// chat route's ends with an error chunk), so that an SDK raises
			// its typed error, then is aborted, so that a client that reads
			// no error event still sees a broken stream, not a clean end.
			// A held chunk (output, and a report) goes first, once the
			// event is durable: its headers before the commit, for the
			// event's status and time to first byte.
			if len(held) > 0 {
				start()
			}
			x.commit()
			if !x.undurable {
				forward(held)
			}
			forward(frame)
			x.flush()
			panic(http.ErrAbortHandler)
		}
		x.touch()
		hadError, hadOutput, hadReports := x.report.Error, x.report.Output.Len(), x.report.Reports
		hadUsage, hadFinish := x.report.Usage, x.report.FinishReason
		tp.Event(&ev, &x.report)
		if !started && len(held) == 0 && hadError == "" && !x.clientGone.Load() && x.errorUnder200(eventError(&ev)) {
			// The stream's first event with output or an error is the
			// provider's failure, and nothing of it reached the client
			// (head is dropped): the next attempt serves, this one billing
			// nothing (a refusal clears Began).
			x.report.StreamEvent(ev.HasData)
			return
		}
		if hadError == "" && x.report.Error != "" {
			x.errorFrame(&ev)
		}
		x.report.StreamEvent(ev.HasData)
		x.progress()
		// A final report that is not cumulative (Anthropic's message_delta)
		// is the usage, as on the chat route, but for a repeat of it: a
		// client that leaves from now on gives the upstream afterUsageWait
		// to end its stream (clientLeft), rather than holding it to
		// drain_timeout. Stored before clientGone is loaded below, as
		// clientLeft stores and loads them the other way round, so one of
		// the two sees the other.
		if k := x.report.Final && !x.report.Cumulative; k != known {
			known = k
			x.usageKnown.Store(k)
		}
		lowered := hadReports > 0 && !x.report.Cumulative && tap.Lowers(x.report.Usage, finalUsage)
		if afterFinal := x.committed || hadReports > 0 && !x.report.Cumulative; afterFinal &&
			(ev.HasData && (x.report.Output.Len() > hadOutput || !quietAfterFinal(&ev, x.report.Ended)) ||
				x.committed && x.report.Reports != hadReports || lowered) {
			// After a final report that is not cumulative (Anthropic's
			// message_delta) the protocol sends only its end, pings,
			// the close of a content block, the report again, or an
			// error. Anything else, any of them the tap counted output
			// in, or one spelled so that a client may read it as another
			// event (more output, in whatever field or spelling a tap
			// might not count), is not relayed: the event is made durable
			// with what the tap counted of it, the final report goes out,
			// and the stream is broken off, whether or not the client is
			// still there. So is a report after the event was made durable
			// (after an error, or once held grew past maxHeld): the client
			// never reads a count the event does not bill. An event that
			// lowers a count of the last final report, which the client may
			// already have read (cumulative counts never fall: a repeat, or
			// one with a count the tap could not read), is not relayed
			// either, and the event keeps the usage and the finish reason
			// from before it.
			if lowered {
				x.report.Usage, x.report.FinishReason = hadUsage, hadFinish
			}
			if !x.committed {
				durable()
				forward(held)
			}
			x.flush()
			if x.clientGone.Load() {
				return
			}
			panic(http.ErrAbortHandler)
		}
		if x.report.Reports != hadReports {
			finalUsage = x.report.Usage
		}
		chunk := src.take(src.n - rd.Pending())
		// A comment is SSE, not part of a body that is not: it is not kept.
		comment := ev.HasComment && len(ev.Other) == 0 && len(ev.Type) == 0 && !ev.HasID && len(ev.Retry) == 0
		if sawData = sawData || ev.HasData; !sawData && !comment && len(noData) < maxNoData {
			noData = append(noData, chunk...)
		}
		if x.report.Error != "" {
			// An error frame, which may echo the upstream's key or address,
			// and any after it (the same frame again leaves Error as it was).
			chunk = s.scrubBytes(rt.provider.Name, chunk)
		}
		own := len(chunk) // this event's bytes, which a final report's hold moves to held's end
		if len(held) > 0 && !x.report.Cumulative && !x.committed {
			// The event after the final report.
			switch {
			case x.clientGone.Load():
				// Nobody to send it to: the exchange's end commits the
				// event, with the last report read.
				held = held[:0]
			case x.report.Reports != hadReports:
				// Another report (Anthropic's message_delta again,
				// cumulative): it takes the held one's place, which goes
				// out, as a cumulative stream's does.
				forward(held)
				held = held[:0]
			case !x.report.Ended && x.report.Error == hadError && len(held)+len(chunk) <= maxHeld:
				// A quiet event (a ping, the close of a block, a comment):
				// held with the report, since the report may come again.
				held, chunk = append(held, chunk...), nil
			default:
				// Anthropic's message_stop, an error (the request's
				// status), or more held than maxHeld: the event is made
				// durable as it stands now, then the report goes out.
				durable()
				forward(held)
				held = held[:0]
			}
		}
		switch {
		case x.report.Final && x.report.Cumulative && !x.clientGone.Load():
			forward(held) // not the last after all
			held, chunk = append(held[:0], chunk...), nil
		case x.report.Final && !x.report.Cumulative && !x.committed && !x.clientGone.Load():
			if len(chunk) > 0 {
				start() // the headers (and the time to first byte) before the event is made durable
			}
			held, chunk = append(held, chunk...), nil // sent once the event is durable
		}
		if quiet != nil || x.report.Final { // no call per event before the final report
			quiet = x.quietAfterReport(quiet)
		}
		if x.clientGone.Load() {
			if x.report.Ended {
				return // nobody to send to, and the upstream's stream is over
			}
			if x.report.Final && !x.report.Cumulative && x.report.Reports != restFor {
				// The usage is known: a repeat of the report, or the end,
				// may follow within afterUsageWait of it.
				restFor = x.report.Reports
				x.renewRest()
			}
			if !rd.Buffered() && !rd.Cut() {
				x.waiting()
			}
			continue
		}
		if x.report.Ended { // the provider's own end: what follows is not read
			x.markComplete()
			if !x.committed { // the end is what the commit holds back, with any final report
				if len(head) > 0 {
					start() // the held events before output, with the headers, before the event is made durable (its status, its time to first byte)
				}
				durable()
			}
			if billedEnd != nil && ev.HasData && x.showsBilled() && x.report.Error == "" {
				// The end tells what was billed, as a chat stream's usage
				// chunk and a non-streamed answer (BilledUsage) do.
				ev.Data = billedEnd(ev.Data, x.event.Usage)
				if chunk == nil { // held as the final report (a count completed): it goes out once, as billed
					held = held[:len(held)-own]
				}
				chunk = sse.AppendEvent(nil, ev)
			}
			forward(held)
			forward(chunk)
			if !rd.SourceEnded() {
				x.flush()
			} // else the handler's return sends it with the body's end, in one write (see chatWriter.leave)
			x.commit()
			x.readToEnd(resp.Body)
			return
		}
		if !started && ev.HasData && x.report.Output.Len() == 0 && x.report.Error == "" && len(head)+len(chunk) <= maxHeld {
			if len(head) == 0 {
				headSince = time.Now()
			}
			if time.Since(headSince) < maxHeadWait { // past it, the held events go out with this one
				head, chunk = append(head, chunk...), nil
			}
		}
		forward(chunk)
		if !rd.Buffered() && !rd.Cut() { // the next event is not here yet, nor on its way
			x.flush()
			x.waiting()
		}
	}
}

// maxHeld bounds the quiet events held after a final report that is not
// cumulative, with it (see passThrough): past it, the event is made
// durable and they go out.
const maxHeld = 64 << 10

// maxHeadWait bounds how long passThrough holds a stream's events before
// output (head): the first event that comes after it goes out with them.
// Anthropic's overload comes at once after message_start; a model slow to
// begin keeps the client waiting for its headers no longer than this (an
// event-driven bound: pings come while it thinks).
const maxHeadWait = 2 * time.Second

// quietTypes are the events Anthropic's protocol may send after its final
// usage report (message_delta) that carry no output: its documented
// stream (docs.anthropic.com, "Streaming Messages") ends content blocks
// with content_block_stop, may send ping events anywhere, and ends with
// message_stop; a repeated message_delta only reports again, and an error
// event may come at any point.
var quietTypes = map[string]bool{"ping": true, "content_block_stop": true, "message_delta": true, "message_stop": true, "error": true}

// outputTypes are the events of Anthropic's protocol that carry output
// (message_start's message, content_block_start's block,
// content_block_delta's delta), and outputMembers the members they carry
// it in. Any other type is one the protocol may add ("handle unknown
// event types gracefully"), which Anthropic's SDKs and the tap skip: an
// event of such a type without any of outputMembers, in any spelling, is
// quiet after the final report (Gemini's candidates are among them, for a
// Gemini stream read on after its event was made durable). A Responses
// API event ("response.…") carries output in many members, and is never
// of an unknown type here.
var (
	outputTypes   = map[string]bool{"message_start": true, "content_block_start": true, "content_block_delta": true}
	outputMembers = []string{"message", "content_block", "delta", "candidates"}
)

// unknownQuiet reports whether typ, an event's type, is none the
// protocols define and fields, its data's members, hold none that output
// comes in.
func unknownQuiet(typ string, fields map[string]json.RawMessage) bool {
	if outputTypes[typ] || strings.HasPrefix(typ, "response.") {
		return false
	}
	for k := range fields {
		for _, m := range outputMembers {
			if strings.EqualFold(k, m) {
				return false
			}
		}
	}
	return true
}

// quietAfterFinal reports whether ev, a data event, is one of quietTypes,
// of an unknown type without output (unknownQuiet), or the stream's end (end: the tap read it as the end, as the Responses
// API's response.completed), by its data's "type" and by its event name
// when it has one (a ping may come with empty data, or as data alone).
// The type is read as a case-sensitive client reads it, and data that
// spells "type" another way too is not quiet: encoding/json, and so the
// tap, would read that spelling instead (an error, or the end, where the
// client reads a text delta).
func quietAfterFinal(ev *sse.Event, end bool) bool {
	name := string(ev.Type)
	var fields map[string]json.RawMessage
	if json.Unmarshal(ev.Data, &fields) != nil || fields == nil {
		return name == "ping" && len(bytes.TrimSpace(ev.Data)) == 0
	}
	var typ string
	for k, v := range fields {
		switch {
		case k == "type":
			if json.Unmarshal(v, &typ) != nil {
				return false
			}
		case strings.EqualFold(k, "type"):
			return false
		}
	}
	if typ == "" {
		return name == "ping"
	}
	return (name == "" || name == typ) && (quietTypes[typ] || end || unknownQuiet(typ, fields))
}

// maxNoData bounds the bytes passThrough keeps of a body with no data
// event in it, as readBody bounds a whole body.
const maxNoData = maxAnswer

// recorder keeps the bytes a Reader reads from the upstream until they are
// taken to be forwarded, so that they go out event by event, unchanged.
type recorder struct {
	r    io.Reader
	buf  []byte // read and not yet taken
	n    int    // bytes read in all
	off  int    // bytes taken in all
	drop int    // bytes of buf given out by the last take, dropped on the next call
}

func (c *recorder) Read(p []byte) (int, error) {
	c.compact()
	n, err := c.r.Read(p)
	c.buf = append(c.buf, p[:n]...)
	c.n += n
	return n, err
}

// take returns the bytes read up to offset upTo (counted from the start)
// and not taken yet; they are valid until the next Read or take.
func (c *recorder) take(upTo int) []byte {
	c.compact()
	k := max(min(upTo-c.off, len(c.buf)), 0)
	c.off += k
	c.drop = k
	return c.buf[:k]
}

func (c *recorder) compact() {
	if c.drop > 0 {
		c.buf = c.buf[:copy(c.buf, c.buf[c.drop:])]
		c.drop = 0
	}
}

// copyHeader passes the upstream's content headers (its Content-Type as
// answerType lets it, else fallback), and its backoff and rate-limit
// headers, on.
func copyHeader(h http.Header, resp *http.Response, fallback string) {
	h.Set("Content-Type", answerType(resp.Header.Get("Content-Type"), fallback))
	if v := resp.Header.Get("Cache-Control"); v != "" {
		h.Set("Cache-Control", v)
	}
	h.Set("X-Accel-Buffering", "no")
	passHeaders(h, resp.Header)
}

// showsBilled reports whether a native answer is to carry the usage
// billed in place of the provider's report: the report is not what was
// billed (reportedAsBilled), or a client's SDK may read it otherwise
// than the tap did (tap.Report.AmbiguousUsage).
func (x *exchange) showsBilled() bool {
	return !reportedAsBilled(x.event) || x.report.AmbiguousUsage
}

// readCall reads r's body and the call read makes of it (a native route's
// or a token counter's Read), its model checked (checkModel); a request it
// cannot read is answered in env (its provider.Error, else 400) and ok is
// false.
func (s *Server) readCall(w http.ResponseWriter, r *http.Request, env provider.Envelope,
	read func(*http.Request, []byte) (provider.Call, error)) (call provider.Call, body []byte, ok bool) {
	if body, ok = s.readRequest(w, r, env); !ok {
		return call, nil, false
	}
	call, err := read(r, body)
	if err == nil {
		err = checkModel(call.Model)
	}
	if err != nil {
		var pe provider.Error
		if !errors.As(err, &pe) {
			pe = badRequest(err.Error())
		}
		env.WriteError(w, pe)
		return call, nil, false
	}
	return call, body, true
}

// streamEnd names what a stream whose body ended with report r lacked to
// be whole, or is "" when it was whole or failed already (r.Error): the
// route's endEvent, unless r is Ended or Final; for a route without one
// (Gemini's, whose chunks end with a candidate's finishReason, and whose
// final usage report is the usageMetadata of that chunk or a later one),
// a finish reason, unless r has one (Vertex AI puts one on every chunk,
// so a cut there goes unseen). The chat route reads its translations'
// ends the same way (relayChatStream).
func streamEnd(endEvent string, r *tap.Report) string {
	switch {
	case r.Error != "" || r.Ended || r.Final:
		return ""
	case endEvent != "":
		return endEvent
	case r.FinishReason == "":
		return "a finish reason"
	}
	return ""
}
