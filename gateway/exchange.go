package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Why an upstream request was cut short, as context causes.
var (
	errConnectTimeout = errors.New("upstream did not answer within connect_timeout")
	errAnswerTimeout  = errors.New("upstream did not answer within stall_timeout (a non-streamed answer's headers come with its whole body)")
	errStalled        = errors.New("upstream sent nothing within stall_timeout")
	errRequestTimeout = timeoutError("upstream request ran past request_timeout")
	errDrainTimeout   = errors.New("client gone; upstream usage did not arrive within drain_timeout")
	// errDrainTimeoutReported is errDrainTimeout's text for a stream whose
	// upstream had reported usage (a final report, or a cumulative one):
	// the usage did arrive, the end did not.
	errDrainTimeoutReported = errors.New("client gone; the upstream had reported usage, but its stream did not end within drain_timeout")
	errBodyNotEnded         = errors.New("upstream body did not end soon after [DONE]")
	errQuietAfterUsage      = errors.New("upstream sent nothing within a second of its usage chunk: taken as the stream's end")
	errQuietAfterError      = errors.New("upstream's stream went on a second after its error: taken as its end")
	errUsageKnown           = errors.New("client gone after the upstream's last usage report; its stream had not ended a second after that report, and the rest was not read")
	errUsageKnownNoSlot     = errors.New("client gone after the upstream's last usage report, with no drain slot free (max_drains): the rest of its stream was not read")
	errDrainsFull           = errors.New("client gone; max_drains streams were already draining, or this customer's share of them")
	errShutdown             = errors.New("cut off: the gateway shut down and its grace period ran out")
)

// timeoutError is a cause that ends an upstream request as a stall does
// (errors.Is it errStalled): a 504, or an error event, and a timeout event.
type timeoutError string

func (e timeoutError) Error() string        { return string(e) }
func (e timeoutError) Is(target error) bool { return target == errStalled }

// exchange is one upstream request in flight: its context, which outlives
// the client's by at most DrainTimeout, the usage report its tap fills in,
// the client's response (written under wmu, since a shutdown's cut-off
// writes to it from another goroutine), and the event it becomes.
type exchange struct {
	s          *Server
	key        *usage.KeyState // the client's key
	start      time.Time       // when this attempt began (its timers' origin; see began)
	event      *usage.Event
	report     tap.Report
	promptText func() tap.Prompt // the request's prompt, for estimates
	// upBody and upPath are the attempt's upstream request (its body as
	// sent, its path below the base URL), whose output limit bounds the
	// hidden reasoning an estimate adds (addHiddenReasoning).
	upBody []byte
	upPath string
	env    provider.Envelope
	// body is the upstream response body as the relays read it: bounded
	// by the output it holds (boundedBody), without an allocation of its
	// own.
	body boundedBody

	w         http.ResponseWriter
	flushTo   func() error // w's flush (see flusherOf)
	wmu       sync.Mutex
	started   bool // the status line was written (under wmu)
	streaming bool // and it began an SSE stream
	// takeTimer moves the connection out of net/http (see takeOver),
	// armed once (takeArmed) at the stream's first flush; over says the
	// exchange has finished, and no move may begin (all under wmu).
	takeTimer  *time.Timer
	takeArmed  bool
	over       bool
	cut        bool // a cut-off ended the response: nothing more is written
	httpStatus int  // the status sent (under wmu)
	cutTimer   *time.Timer
	// errorEnd ends the upstream's stream afterUsageWait after its error
	// frame (see errorFrame).
	errorEnd *time.Timer
	// writeDeadlineAt is when (since start) the client connection's write
	// deadline was last moved on, if writeDeadlineSet (see
	// armWriteDeadline; under wmu).
	writeDeadlineAt  time.Duration
	writeDeadlineSet bool
	// stoppedReading says a write to the client missed its deadline (under
	// wmu).
	stoppedReading bool

	clientGone atomic.Bool
	// pending is a copy of the event being published, journaled should the
	// sink be slow; pubDone says the sink has answered (both under pubMu;
	// see journalIfSlow).
	pending usage.Event
	pubMu   sync.Mutex
	pubDone bool
	// oneChoice says the request asks for one choice (n absent or 1): an
	// OpenAI stream's report in its finish chunk is then its last.
	oneChoice bool
	// usageKnown is set by a relay once the upstream's last usage report
	// has come: a client that leaves then gives the upstream
	// afterUsageWait, not drain_timeout, for a repeat of the report or
	// its end (renewRest, errUsageKnown).
	// The relay stores it before it loads clientGone, clientLeft the other
	// way round: one of them sees the other.
	usageKnown atomic.Bool
	// rest is the wait renewRest arms, set once by clientLeft or the relay
	// (whichever comes first), renewed by the relay at each report after,
	// stopped by the relay's end and by finish.
	rest atomic.Pointer[time.Timer]
	// quietFor is the final report (tap.Report.Reports, 0: none) a relay's
	// wait for the stream's end was armed for (quietAfterReport); the
	// relay's goroutine alone reads and writes it.
	quietFor int
	// complete is set before the response's last write: a client that
	// hangs up after it (an SDK closing at [DONE]) did not cancel.
	complete atomic.Bool
	cutoff   atomic.Bool // cut off at shutdown

	ctx        context.Context
	cancel     context.CancelCauseFunc
	stopWatch  func() bool
	stall      *time.Timer
	stallAfter time.Duration
	endBy      time.Duration // what is left of request_timeout (from the request's arrival): the most time since start
	// lastEvent is when the upstream last sent something, in nanoseconds
	// since start (see touch); stallOff says the stall timer is stopped.
	lastEvent  atomic.Int64
	stallOff   atomic.Bool
	inWrite    atomic.Bool   // a write to the client is under way: the upstream is not being read (see clientWrite)
	left       chan struct{} // closed when clientLeft has run
	draining   bool          // holds a drain slot; written before left closes
	drainTimer *time.Timer
	responded  bool // the upstream answered 200
	// untilClose: the upstream's 200 body has no length to fall short of
	// (HTTP/1's body ended by the connection's close: no Content-Length,
	// not chunked), so readBody checks that its JSON is whole.
	untilClose bool
	unreached  bool // the upstream could not be reached (metrics: kind "unreachable")
	// clientRefused: the upstream refused the client's request itself
	// with a status that is not a 400, 413 or 422 (OpenAI's 429 "Request
	// too large": tooLargeForLimit): metrics kind "invalid_request".
	clientRefused bool
	// refusedWith is the HTTP status the upstream's refusal is answered
	// with (its own, or 502 for a redirect), 0 if it did not refuse: the
	// metrics' kind of a failed attempt that went on to another
	// deployment, whose event sent the client no status.
	refusedWith int
	committed   bool // the event is made (durable, or in the journal)
	// undurable: commit could neither publish nor journal the event (the
	// sink and the crash journal both failing): it is held in memory
	// alone, and a stream withholds its usage and its end (see heldBack).
	undurable bool
	ck        checkpoint

	// Failover (see attempts.go). canRetry says another attempt may follow
	// this one until retryUntil; retry is set when this one failed before
	// the client got a byte and the request goes on to the next: nothing
	// of it was written to the client, and its event is the operator's
	// cost. upstreamFailed says the deployment failed (a connect error, a
	// 408, 429 or 5xx, a broken stream, the provider's error under a 200:
	// errorUnder200, or after the first byte: brokeAfterStart), retryAfter
	// the backoff it asked for.
	canRetry       bool
	retryUntil     time.Time
	retry          bool
	upstreamFailed bool
	retryAfter     time.Duration
	// held is the request's hold on its spend limits, released by the
	// finish of its last attempt (one not retried), nil when none.
	held *spendHold
}

// newExchange starts the exchange of request r, routed by rt, its event
// id the request's id (X-Request-Id). Its errors are answered in env.
func (s *Server) newExchange(w http.ResponseWriter, r *http.Request, rt route, endpoint string, stream bool, env provider.Envelope) *exchange {
	start := time.Now()
	who := keyOf(r)
	none := false // nothing left of request_timeout
	x := &exchange{s: s, key: who, start: start, stallAfter: rt.provider.StallTimeout, endBy: rt.provider.RequestTimeout, promptText: func() tap.Prompt { return tap.Prompt{} },
		env: env, w: w, flushTo: flusherOf(w), left: make(chan struct{}),
		event: &usage.Event{
			Version: usage.SchemaVersion, ID: requestIDOf(r), Time: start.UTC(),
			CustomerID: who.CustomerID, KeyID: who.KeyID, Provider: rt.provider.Name, Model: rt.model,
			Endpoint: endpoint, Stream: stream, Status: usage.StatusOK,
		}}
	if len(rt.deployments) > 0 {
		x.event.Deployment = rt.deployments[0].name
	}
	if st := stateOf(r); st != nil {
		x.held = st.held
		// Every attempt of the request is dated at its first one's start
		// (usage.Event.Time: it places the charged one in its period and
		// selects its price version). At each attempt's own start, a
		// request retried across midnight or a price change was billed in
		// the next day, month or price version.
		if st.arrived.IsZero() {
			st.arrived = start
		}
		x.event.Time = st.arrived.UTC()
		// request_timeout bounds the whole request, from its arrival (its
		// first attempt's start): a later attempt gets what is left of it.
		// Timed from each attempt's own start, a request whose first
		// deployment failed slowly ran up to retry.budget past it.
		if spent := start.Sub(st.arrived); x.endBy > 0 && spent > 0 {
			none = spent >= x.endBy
			x.endBy = max(x.endBy-spent, time.Nanosecond)
		}
	}
	x.ck.at = 0
	x.ctx, x.cancel = context.WithCancelCause(context.WithoutCancel(r.Context()))
	if none {
		// Nothing is left: the upstream is not asked (its round trip ends
		// at once), and the client gets 504 naming request_timeout, the
		// event a timeout; no other attempt follows (serveAttempts).
		x.cancel(errRequestTimeout)
	}
	x.stopWatch = context.AfterFunc(r.Context(), x.clientLeft)
	s.inflight.Add(1)
	s.mu.Lock()
	s.active[x] = struct{}{}
	s.mu.Unlock()
	if s.metrics != nil {
		s.metrics.inFlight.Inc()
	}
	return x
}

// begin journals the request, with its body, just before it goes upstream.
// The journaled event is within the event's bounds, as the event will be
// (usage.Event.Normalize): the client's end user and tags, from a body of
// up to max_request_bytes, went into the begin record whole, and a record
// of a few MiB is one the journal's scan takes for corrupt after a crash,
// losing that request and every one journaled after it.
func (x *exchange) begin(body []byte) {
	e := *x.event
	e.Normalize()
	// The placeholder usage after Normalize: reasoning expected against no
	// completion yet is no correction, and a crashed event keeps the
	// journaled corrections.
	// The hidden reasoning a crash would bill, as averages give it; the
	// request's own settings and limit are read by Recover, from the body
	// journaled, only after a crash (a per-request read of a large body
	// costs more than the rest of begin).
	e.Usage = usage.Tokens{PromptTokens: int64(len(body) / 4), ReasoningTokens: x.s.hidden.expected(e.CustomerID, e.Model)}
	x.s.journal.Begin(&e, body)
}

// clientLeft runs when the client goes away: the upstream is read on, to
// learn the usage, for at most DrainTimeout and only while the drain pool
// has a slot for the customer (MaxDrains in all; see drainPool);
// otherwise it is cut off now and the usage is estimated.
func (x *exchange) clientLeft() {
	defer close(x.left)
	x.clientGone.Store(true)
	known := x.usageKnown.Load()
	if !x.s.drains.take(x.key.CustomerID) {
		if known {
			x.cancel(errUsageKnownNoSlot)
		} else {
			x.cancel(errDrainsFull)
		}
		return
	}
	x.draining = true
	x.drainTimer = time.AfterFunc(x.s.cfg.DrainTimeout, func() { x.cancel(errDrainTimeout) })
	if known {
		// The upstream is given afterUsageWait from its last report, not
		// drain_timeout, for a repeat of it (Anthropic may send more than
		// one message_delta, each renewing the wait) or its end.
		x.renewRest()
	}
}

// cause is why the upstream context ended, or nil.
func (x *exchange) cause() error { return context.Cause(x.ctx) }

// finish ends the exchange, whatever happened: its event is committed (if
// the response did not already), and its timers and drain slot released.
func (x *exchange) finish() {
	if !x.stopWatch() {
		<-x.left
		if x.draining {
			x.drainTimer.Stop()
			x.s.drains.release(x.key.CustomerID)
		}
	}
	x.stopRest()
	if x.stall != nil {
		x.stallOff.Store(true)
		x.stall.Stop()
	}
	if x.errorEnd != nil {
		x.errorEnd.Stop()
	}
	x.wmu.Lock()
	if x.cutTimer != nil {
		x.cutTimer.Stop()
	}
	if x.takeTimer != nil {
		x.takeTimer.Stop()
	}
	x.over = true
	last := !x.retry || x.cut || !x.canRetry // serveAttempts tries no other
	x.wmu.Unlock()
	x.commit()
	if last {
		x.held.end(x)
	}
	x.cancel(nil)
	x.s.mu.Lock()
	delete(x.s.active, x)
	x.s.mu.Unlock()
	if x.s.metrics != nil {
		x.s.metrics.inFlight.Dec()
	}
	x.s.inflight.Done()
}

// commit completes the event and makes it durable, once: before the
// response's last bytes (its usage and its end), so that a client that got
// them was metered, or when the exchange finishes. An event the sink
// cannot take stays in the crash journal, for the next start, and is
// offered to the sink again every second meanwhile (owed.go).
func (x *exchange) commit() { x.commitEvent(false) }

// commitEvent is commit; whole says the response is a whole answer, which
// is withheld when its event is not durable (commitAnswer).
func (x *exchange) commitEvent(whole bool) {
	if x.committed {
		return
	}
	x.committed = true
	x.settle()
	e := x.event
	if x.retry {
		x.retire()
		return
	}
	slow := x.journalIfSlow(e)
	err := x.s.sink.Publish(context.WithoutCancel(x.ctx), e)
	x.published(slow)
	if err != nil {
		failing := x.s.journalFailing()
		if failing != nil && whole {
			// The answer will be withheld (withholdAnswer): the event
			// records what the client got, in every copy kept of it.
			e.HTTPStatus, e.NotCharged = http.StatusServiceUnavailable, true
		}
		x.s.journal.Fail(e)
		x.undurable = x.s.logUndurable("usage event not published", e, err, failing)
		x.s.owe(e)
		return
	}
	x.s.journal.End(e.ID)
}

// commitAnswer commits the event of a whole (non-streamed) answer before
// the answer is sent, and reports whether it may be sent: false when the
// event could not be made durable (exchange.undurable), and the client
// was then answered 503 metering_unavailable in its place
// (withholdAnswer). Such an event records that 503 and is not charged
// (usage.Event.NotCharged: the customer had no answer, and the upstream's
// tokens stay the operator's cost, as a retried attempt's), in the crash
// journal, the owed copy and the log line alike.
func (x *exchange) commitAnswer() bool {
	x.commitEvent(true)
	return !x.withholdAnswer()
}

// slowPublish is how long commit waits for the sink's answer before it
// journals the event it is publishing as the request's final one.
const slowPublish = 10 * time.Millisecond

// journalIfSlow journals e as the request's final event (Journal.Fail)
// should the sink take longer than slowPublish to answer, and returns the
// timer, for published once the sink has answered. Until then the
// journal held only the request's last checkpoint, which may miss the
// provider's final usage report and the output of the last read: a
// process killed while a slow NATS (a leader election, a connection that
// stopped answering) held the PubAck for up to publish_timeout was
// recovered with an estimate of a request whose exact usage it had (a
// crash review: 201 of 400 completion tokens, no reasoning, and 0 for a
// non-streamed answer). The next start publishes the journaled event as
// it is, under its id, which JetStream or the ledger drops if its PubAck
// had come. A fast publish, nearly every one, journals nothing more.
func (x *exchange) journalIfSlow(e *usage.Event) *time.Timer {
	x.pending = *e // the sink normalizes e as it publishes: the timer's goroutine reads a copy
	return time.AfterFunc(slowPublish, func() {
		x.pubMu.Lock()
		defer x.pubMu.Unlock()
		if !x.pubDone {
			x.s.journal.Fail(&x.pending)
		}
	})
}

// published ends journalIfSlow's wait: the sink has answered. A journal
// write the timer began is over when it returns, so that the End or Fail
// that follows comes after it.
func (x *exchange) published(slow *time.Timer) {
	slow.Stop()
	x.pubMu.Lock()
	x.pubDone = true
	x.pubMu.Unlock()
}

// journalFailing is why the crash journal cannot write, nil while it can
// (or when it does not tell: JournalHealth).
func (s *Server) journalFailing() error {
	if jh, ok := s.journal.(JournalHealth); ok {
		return jh.Failing()
	}
	return nil
}

// logUndurable logs an event the sink refused (neither published nor
// spooled) and journaled with Fail; journalErr is why the journal cannot
// write (journalFailing). While the journal cannot write either
// (a full disk), the event is in memory alone until a write succeeds, and
// lost if the process dies first: the line then carries the whole event,
// as JSON, the one record of it left; and it reports true.
func (s *Server) logUndurable(msg string, e *usage.Event, err, journalErr error) (inMemory bool) {
	rid := e.ID
	if e.RequestID != "" { // a retried attempt's, under an id of its own
		rid = e.RequestID
	}
	if journalErr == nil {
		s.log.Error(msg+"; kept in the crash journal for the next start, and offered again every second meanwhile",
			"request_id", rid, "event_id", e.ID, "customer_id", e.CustomerID, "err", err)
		return false
	}
	b, _ := json.Marshal(e)
	s.log.Error(msg+"; the crash journal cannot write either: the event is held in memory until it can, and this line is its record",
		"request_id", rid, "event_id", e.ID, "customer_id", e.CustomerID, "err", err, "journal_err", journalErr,
		"event", json.RawMessage(b))
	return true
}

// retire makes the event of an attempt that failed and is retried
// durable under an id of its own (the request's id goes to the attempt
// that follows), marked not charged and naming its request. The journal
// holds it as a final event before the request's entry ends, so that a
// crash at any point records it once: from the journal, or as published
// (the ledger keeps one event per id).
func (x *exchange) retire() {
	e := x.event
	rid := e.ID
	e.ID, e.RequestID, e.NotCharged = newEventID(), rid, true
	x.s.journal.Begin(e, nil)
	x.s.journal.Fail(e)
	x.s.journal.End(rid)
	if err := x.s.sink.Publish(context.WithoutCancel(x.ctx), e); err != nil {
		x.s.logUndurable("usage event of a retried attempt not published", e, err, x.s.journalFailing())
		x.s.owe(e)
		return
	}
	x.s.journal.End(e.ID)
}

// settle resolves the event: status, usage, timings, what the upstream
// said it served; it logs the request.
func (x *exchange) settle() {
	e, r := x.event, &x.report
	cause := x.cause()
	x.wmu.Lock()
	if e.HTTPStatus == 0 {
		e.HTTPStatus = x.httpStatus
	}
	stoppedReading := x.stoppedReading
	x.wmu.Unlock()
	if r.ServedModel != "" {
		e.ServedModel = r.ServedModel
	}
	if r.FinishReason != "" {
		e.FinishReason = r.FinishReason
	}
	// The status names what went wrong first: a failure before the
	// response is already set; then a cut-off, a stall, an upstream error,
	// and last a client that left (an SDK hangs up after an error frame).
	switch {
	case e.Status != usage.StatusOK:
	case x.cutoff.Load():
		e.Status, e.Error = usage.StatusCutOff, errShutdown.Error()
	case errors.Is(cause, errStalled):
		e.Status, e.Error = usage.StatusTimeout, cause.Error()
	case r.Error != "":
		e.Status, e.Error = usage.StatusUpstreamError, x.s.scrubFor(e.Provider, r.Error)
	case x.clientGone.Load() && !x.complete.Load():
		e.Status = usage.StatusClientCancelled
		switch {
		case e.Error != "":
		case stoppedReading:
			e.Error = fmt.Sprintf("a write of the response waited write_timeout (%s) for the client to take it (it read nothing, or too slowly): taken as gone", x.s.cfg.WriteTimeout)
		case errors.Is(cause, errDrainTimeout) && (r.Final || r.Cumulative && r.Reported):
			e.Error = errDrainTimeoutReported.Error()
		case cause != nil:
			e.Error = cause.Error()
		}
	}
	if x.responded {
		if e.Stream && refusedAfterReport(r) {
			r.Usage, r.Reported = usage.Tokens{}, false // as if it had reported nothing: Resolve bills nothing
		}
		e.Usage, e.UsageSource = r.Resolve(x.s.est, x.promptText)
		if r.ReasoningOutside && e.UsageSource == usage.SourceUpstream && !usage.HasCorrection(e.Corrections, usage.CorrectionReasoningOutsideCompletion) {
			e.Corrections = strings.TrimPrefix(e.Corrections+","+usage.CorrectionReasoningOutsideCompletion, ",")
		}
		x.addHiddenReasoning()
	} else { // refused or unreachable: nothing was produced, nothing is billed
		e.Usage, e.UsageSource = usage.Tokens{}, usage.SourceEstimated
	}
	// At least the time to first token, which is rounded up to 1 ms.
	e.DurationMillis = max(time.Since(x.began()).Milliseconds(), e.TTFTMillis)
	e.Normalize() // whatever the upstream sent, the event can be stored
	if !x.retry {
		// tpm_limit counts the request's tokens: those of the attempt the
		// client got. One retried elsewhere is the operator's cost (not
		// charged), as its usage is: counted, it throttled the customer
		// for the operator's failing deployment.
		x.s.limits.tokens(x.key, e.Usage.Total())
	}
	x.s.hidden.observe(e, r)
	x.s.metrics.observe(e, x.unreached, x.refusedWith, x.clientRefused)
	level := slog.LevelInfo // a failed request stays in the log at TOLLGATE_LOG_LEVEL=warn
	if e.Status == usage.StatusUpstreamError || e.Status == usage.StatusTimeout || e.Status == usage.StatusCutOff {
		level = slog.LevelWarn
	}
	logRequest(x.ctx, x.s.log, level, e, x.retry)
}

// refusedAfterReport reports whether r is of a stream the provider refused
// after a usage report that was not its last: its error frame came before
// any output (which clears r.Began), and no final report followed. A report
// so far, of the prompt alone (a Gemini chunk whose usageMetadata counts
// only the prompt, a vLLM role chunk under continuous_usage_stats), is no
// bill of a refusal, which bills nothing (docs/billing.md), as Anthropic's
// tap drops message_start's figures at an error before any content: the
// request was billed its prompt as partial only because the provider
// reported progress before it refused.
func refusedAfterReport(r *tap.Report) bool {
	return r.Reported && !r.Final && r.Error != "" && !r.Began && r.Output.Len() == 0
}

// addHiddenReasoning adds to an event whose usage the provider never
// reported (a stream that ended normally from an upstream that sends no
// usage, or one cancelled, stalled, broken, cut off before its final
// report), after output began, the reasoning its model is seen to spend unseen
// (hiddenReasoning's average), as Recover does for a crash: OpenAI's
// reasoning models report reasoning_tokens only in the final usage and
// stream none of it (a Responses API summary stands for it, and does not
// count as showing it), yet the reasoning is spent, and billed, before the
// first output token. Without it such a stream was billed 0 reasoning
// tokens. Nothing is added when the stream showed its reasoning (counted
// in the estimate already), when the provider reported any usage (a
// report so far, as Gemini's cumulative one, covers the reasoning spent:
// none when it names none), or when no output came (the reasoning may not
// be over).
func (x *exchange) addHiddenReasoning() {
	e, r := x.event, &x.report
	unreported := e.UsageSource == usage.SourceEstimated && !r.Reported
	countedNothing := r.OutputFloored && e.Usage.ReasoningTokens <= 0 // a report of no output ("usage":{}) says nothing of reasoning
	if !unreported && !countedNothing || r.ReasoningShown || r.Output.Len() == 0 {
		return
	}
	if hidden := x.s.hidden.estimate(e.CustomerID, e.Model, x.upBody, x.upPath, e.Usage.CompletionTokens); hidden > 0 {
		e.Usage.CompletionTokens += hidden
		e.Usage.ReasoningTokens = hidden
		note := fmt.Sprintf("%d reasoning tokens the model hides estimated from recent averages", hidden)
		switch {
		case e.Status == usage.StatusOK: // no error to tell; usage_source says it is estimated
		case e.Error == "":
			e.Error = note
		default:
			e.Error += "; " + note
		}
	}
}

// logRequest writes a request's log line: its event's ids, route, status
// and usage, whether it was retried, and its error when it has one (what
// failed, as the event records it, scrubbed of secrets). The attributes
// are typed (status and usage_source as strings): given as key-value
// pairs, each was boxed, and the two named string types were encoded by
// the JSON handler with encoding/json, once per request.
func logRequest(ctx context.Context, log *slog.Logger, level slog.Level, e *usage.Event, retried bool) {
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := [...]slog.Attr{slog.String("request_id", e.ID), slog.String("customer_id", e.CustomerID),
		slog.String("key_id", e.KeyID), slog.String("endpoint", e.Endpoint), slog.String("model", e.Model),
		slog.String("provider", e.Provider), slog.String("deployment", e.Deployment), slog.Int("attempt", e.Attempt),
		slog.Bool("retried", retried), slog.String("status", string(e.Status)), slog.Int("http_status", e.HTTPStatus),
		slog.String("usage_source", string(e.UsageSource)), slog.Int64("prompt_tokens", e.Usage.PromptTokens),
		slog.Int64("completion_tokens", e.Usage.CompletionTokens), slog.Int64("ttft_ms", e.TTFTMillis),
		slog.Int64("duration_ms", e.DurationMillis), slog.String("error", e.Error)}
	n := len(attrs)
	if e.Error == "" {
		n--
	}
	log.LogAttrs(ctx, level, "request", attrs[:n]...)
}

// failedBeforeOutput records, when nothing else has, that the upstream's
// stream failed with err before anything reached the client: an upstream
// that failed without producing anything bills nothing (tap.Report.Resolve
// then resolves no usage), unless it reported usage before it failed, as
// Anthropic's message_start does.
func (x *exchange) failedBeforeOutput(err error) {
	if x.report.Error == "" {
		x.report.Error = "upstream failed before any output: " + x.s.scrubFor(x.event.Provider, upstreamErrorText(err))
	}
}

// markComplete is called before the response's last write: if the client
// is still there, its hanging up from now on is not a cancellation.
func (x *exchange) markComplete() {
	if !x.clientGone.Load() {
		x.complete.Store(true)
	}
}

// began is when the request's first attempt began: the event's ttft_ms
// and duration_ms, and the TTFT and duration histograms, count from it, so
// that they include what failed attempts made the client wait. It is read
// from retryUntil (serveAttempts sets it to then plus retry.budget for
// every attempt), not kept in serveAttempts' frame, which stays on a
// stream's stack for its whole life (TestStreamStack); start when unset.
func (x *exchange) began() time.Time {
	if x.retryUntil.IsZero() {
		return x.start
	}
	return x.retryUntil.Add(-x.s.cfg.Retry.Budget)
}

// firstByte records the time to first token, once.
func (x *exchange) firstByte() {
	if x.event.TTFTMillis == 0 {
		x.event.TTFTMillis = max(time.Since(x.began()).Milliseconds(), 1)
	}
}
