package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The client side of an exchange. Every write to the client goes through
// these methods, under wmu; after a cut-off (or once the client is gone)
// they write nothing.

// respond sends the status line, with the headers hdr sets, once; stream
// says it begins an SSE stream (which a cut-off ends with the protocol's
// error event). It reports whether the client can be written to.
func (x *exchange) respond(status int, stream bool, hdr func(http.Header)) bool {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.cut || x.clientGone.Load() {
		return false
	}
	if !x.started {
		hdr(x.w.Header())
		x.w.WriteHeader(status)
		x.started, x.streaming, x.httpStatus = true, stream, status
	}
	return true
}

// withholdAnswer answers 503 metering_unavailable in place of a whole
// (non-streamed) answer whose event could not be made durable
// (exchange.undurable: neither published nor spooled, and the crash
// journal cannot write): "durable before done" holds for a whole answer as
// for a stream's usage and end (heldBack). It reports whether it did, and
// the caller then sends nothing more. The event is still offered to the
// sink every second (owed.go), as a 503 not charged (commitAnswer).
func (x *exchange) withholdAnswer() bool {
	if !x.undurable {
		return false
	}
	x.writeError(provider.Err(http.StatusServiceUnavailable, "service_unavailable", "metering_unavailable",
		"the gateway could not record this request's usage durably (its event stream and its crash journal both failed): "+
			"the answer is withheld; retry once the gateway is ready again (GET /readyz on its admin listener)"))
	return true
}

// write sends b; a failed write means the client is gone.
func (x *exchange) write(b []byte) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.cut || x.clientGone.Load() {
		return
	}
	x.armWriteDeadline()
	x.clientWrite(true)
	_, err := x.w.Write(b)
	x.clientWrite(false)
	if err != nil {
		x.writeFailed(err)
	}
}

// flush sends what write wrote; before respond it does nothing (net/http
// would send a 200 with headers of its own choosing).
func (x *exchange) flush() {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.cut || x.clientGone.Load() || !x.started {
		return
	}
	x.armWriteDeadline()
	x.clientWrite(true)
	err := x.flushTo()
	x.clientWrite(false)
	if err != nil {
		x.writeFailed(err)
		return
	}
	if x.streaming && !x.takeArmed && !x.over {
		// The stream's header and first events are out: its connection
		// can leave net/http (see takeover) once it has lasted takeAfter.
		// A request served otherwise (HTTP/2) has none to take.
		x.takeArmed = true
		if t := takeoverOf(x.w); t != nil {
			x.takeTimer = time.AfterFunc(takeAfter, func() { x.takeOver(t) })
		}
	}
}

// takeAfter is how long a stream runs before its connection leaves
// net/http: a stream that ends sooner (most non-idle ones) never pays for
// the move, in CPU or in a gap between its events.
const takeAfter = 100 * time.Millisecond

// takeOver moves a stream's connection out of net/http through t (see
// takeover), unless the stream has ended, or its client has gone.
func (x *exchange) takeOver(t *takeover) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.over || x.cut || x.clientGone.Load() {
		return
	}
	t.take()
	x.writeDeadlineSet = false // net/http's Hijack cleared the connection's deadlines
}

// writeError answers with e in the route's envelope, unless a response
// already began (a broken stream ends with its protocol's error event
// instead: see streamError).
func (x *exchange) writeError(e provider.Error) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.cut || x.started || x.clientGone.Load() {
		return
	}
	x.armWriteDeadline()
	x.env.WriteError(x.w, e)
	x.started, x.httpStatus = true, e.Status
}

// fail answers the client with an upstream failure (status 502 or 504) and
// records it on the event; the deployment failed (see mayRetry).
func (x *exchange) fail(status int, eventStatus usage.Status, err error) {
	msg := x.s.scrubFor(x.event.Provider, err.Error())
	x.event.Status, x.event.Error = eventStatus, msg
	if status >= 500 {
		x.upstreamFailed = true
		if x.mayRetry() {
			return
		}
	}
	x.failWith(status, msg)
}

// failHere is fail for a failure that is not the deployment's (the
// provider's error object naming the client's side): the client gets it,
// with no failover, and the deployment's health is left as it was.
func (x *exchange) failHere(status int, eventStatus usage.Status, err error) {
	msg := x.s.scrubFor(x.event.Provider, err.Error())
	x.event.Status, x.event.Error = eventStatus, msg
	x.failWith(status, msg)
}

// failWith answers the client with an upstream failure, status and msg.
func (x *exchange) failWith(status int, msg string) {
	x.writeError(upstreamFailure(status, msg))
}

// upstreamFailure is the error a client gets for an upstream that failed
// (status 502, or 504 when it did not answer in time), msg saying how:
// for a request (failWith) and a token count alike.
func upstreamFailure(status int, msg string) provider.Error {
	code := "upstream_error"
	if status == http.StatusGatewayTimeout {
		code = "upstream_timeout"
	}
	return provider.Err(status, "upstream_error", code, "the upstream provider failed: "+msg)
}

// mayRetry reports, and records in x.retry, that this attempt's failure
// goes to the next attempt instead of the client: another attempt may
// follow, within the retry budget, the client has got nothing yet (nor
// left, nor been cut off), and request_timeout has not run out (nothing
// would be left of it for the next: see timeUp, whose turning retry off
// can miss while wmu is held).
func (x *exchange) mayRetry() bool {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.canRetry && !x.started && !x.cut && !x.clientGone.Load() && time.Now().Before(x.retryUntil) &&
		!errors.Is(x.cause(), errRequestTimeout) {
		x.retry = true
	}
	return x.retry
}

// errorUnder200 is called when the upstream answered 200 and its answer
// is an error, errBody the error object as the provider sent it (a whole
// body, or its stream's first event), before anything of the answer
// reached the client, and x.report holds the error (and no output). When
// the error names the provider's side (serverSide), the attempt failed
// upstream, as on a 5xx: its deployment cools down, and when another
// attempt may follow (mayRetry) it reports true: the caller writes nothing
// more and returns, the event is the operator's cost (an upstream_error,
// not charged) and the next attempt serves. Otherwise, and for an error
// of the client's side or one that names neither, it reports false: the
// client gets the answer as it came.
func (x *exchange) errorUnder200(errBody []byte) bool {
	if x.report.Error == "" || x.report.Output.Len() > 0 || !serverSide(errBody) {
		return false
	}
	x.upstreamFailed = true
	return x.mayRetry()
}

// brokeAfterStart records that the upstream failed a stream after the
// client had its first byte, too late for another attempt, cause the
// stream's end (nil: it broke, or ended cut short): its deployment failed,
// and rests as one that failed before the first byte does (see
// deployment). Left as it was, a deployment that broke every stream after
// its first byte kept its share of the traffic for ever. A stream that ran
// past request_timeout is not the deployment's failure.
func (x *exchange) brokeAfterStart(cause error) {
	if !errors.Is(cause, errRequestTimeout) {
		x.upstreamFailed = true
	}
}

// errorFrame is called when ev, an upstream stream's event, brought the
// stream's first error (x.report.Error): when the error names the
// provider's side (serverSide), as Anthropic's overloaded_error after
// output began does, the deployment failed, though the client may have
// had its first byte and no other attempt can follow (see
// brokeAfterStart); an error of the client's side rests nothing.
// The error ends the stream (Anthropic's error event is its last; an
// OpenAI error chunk is followed by [DONE] or by nothing): an upstream
// that holds its body open after it is cut off afterUsageWait later
// (errQuietAfterError), the end taken as the provider's error, rather
// than holding the client to stall_timeout and recording a timeout the
// upstream never had.
//
//go:noinline
func (x *exchange) errorFrame(ev *sse.Event) {
	if serverSide(eventError(ev)) {
		x.upstreamFailed = true
	}
	if x.errorEnd == nil {
		x.errorEnd = timerCancel(x, afterUsageWait, errQuietAfterError)
	}
}
