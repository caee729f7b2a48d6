package gateway

// An exchange's clocks: the stall timer and request_timeout (armStall,
// stallCheck, timeUp), the wait for the rest of a stream whose usage is
// known (renewRest), and a shutdown's cut-off (cutOff), which may have to
// end a write to a client that stopped reading.

import (
	"math"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// cutOff ends the client's response now, for a shutdown: an SSE stream
// gets the protocol's error event (and its end), a response not yet begun
// a 503; the upstream is read on for drain, for its usage, and the event
// records cut_off.
func (x *exchange) cutOff(drain time.Duration) {
	x.lockToCutOff()
	defer x.wmu.Unlock()
	if x.cut {
		return
	}
	e := provider.Err(http.StatusServiceUnavailable, "server_error", "server_shutdown",
		"the gateway is shutting down and ended this response before the provider finished; retry it")
	x.armWriteDeadline()
	switch {
	case x.started && x.streaming && !x.clientGone.Load():
		if _, err := x.w.Write(x.env.StreamError(e)); err == nil {
			_ = x.flushTo()
		}
	case !x.started && !x.clientGone.Load():
		x.env.WriteError(x.w, e)
		x.started, x.httpStatus = true, http.StatusServiceUnavailable
	}
	x.cut = true
	x.cutoff.Store(true)
	x.clientGone.Store(true) // the relay reads on for the usage, writing nothing
	x.cutTimer = time.AfterFunc(drain, func() { x.cancel(errShutdown) })
}

// cutOffWriteWait is how long a cut-off waits for a write to the client
// already under way (wmu held): a write still blocked after it is a client
// that stopped reading, which would otherwise hold the cut-off, and the
// shutdown, until write_timeout.
const cutOffWriteWait = time.Second

// lockToCutOff takes wmu for cutOff. When a write to the client holds it
// past cutOffWriteWait, the client connection's write deadline is set to
// now, and again every 10 ms (a write moves it on once a second:
// armWriteDeadline) until wmu is taken, so that the write fails
// (writeFailed: the client is taken as gone, as at write_timeout) and lets
// go of it.
func (x *exchange) lockToCutOff() {
	locked := make(chan struct{})
	go func() { x.wmu.Lock(); close(locked) }() // wmu is then cutOff's, which unlocks it
	wait := time.NewTimer(cutOffWriteWait)
	defer wait.Stop()
	select {
	case <-locked:
		return
	case <-wait.C:
	}
	again := time.NewTicker(10 * time.Millisecond)
	defer again.Stop()
	for {
		x.writeDeadlineNow()
		select {
		case <-locked:
			return
		case <-again.C:
		}
	}
}

// writeDeadlineNow sets the client connection's write deadline to now,
// from any goroutine, beside a write under way: through the takeover under
// x.w (a stream taken from net/http or not), else net/http's writer.
func (x *exchange) writeDeadlineNow() {
	w := x.w
	for {
		if t, ok := w.(*takeover); ok {
			_ = t.setWriteDeadlineNow()
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now())
			return
		}
		w = u.Unwrap()
	}
}

// armStall starts the stall timer: the upstream is cut off when nothing
// arrives for StallTimeout. Call touch on every upstream event.
//
// The timer is made idle and then set (Reset), so that its first run
// reads t after t was written: set at once, a first check due at once
// (request_timeout nearly over, a short stall_timeout) could run before
// the assignment and call stallCheck with a nil timer (the race detector
// caught it).
func (x *exchange) armStall() {
	x.touch()
	var t *time.Timer
	t = time.AfterFunc(math.MaxInt64, func() { x.stallCheck(t) })
	t.Reset(x.nextCheck(time.Since(x.start), 0))
	x.stall = t
}

// touch records that the upstream sent something. The stall timer is not
// reset on every event (a timer reset cost more than the rest of an
// event's bookkeeping): when it fires, stallCheck cuts the upstream off
// only if nothing came for stallAfter, and otherwise sets it again for the
// rest of that time.
func (x *exchange) touch() { x.lastEvent.Store(int64(time.Since(x.start))) }

// clientWrite marks a write to the client begun (true) or over (false).
// While the relay is held in a write (a client that reads slowly or not
// at all, for up to write_timeout) it reads nothing from the upstream, so
// the upstream's silence is not measured: the stall is counted from the
// write's end. A client that stopped reading is the client's doing
// (client_cancelled, its usage read on for), not a stalled upstream's,
// which would rest the deployment and bill only what reached the client.
func (x *exchange) clientWrite(begun bool) {
	if !begun {
		x.touch()
	}
	x.inWrite.Store(begun)
}

// stallCheck runs when the stall timer t fires.
func (x *exchange) stallCheck(t *time.Timer) {
	if x.stallOff.Load() {
		return
	}
	elapsed := time.Since(x.start)
	if x.endBy > 0 && elapsed >= x.endBy {
		x.timeUp()
		return
	}
	quiet := elapsed - time.Duration(x.lastEvent.Load())
	if x.inWrite.Load() {
		quiet = 0 // the relay waits on the client (at most write_timeout), not on the upstream
	}
	if quiet >= x.stallAfter {
		x.cancel(errStalled)
		return
	}
	t.Reset(x.nextCheck(elapsed, quiet))
	if x.stallOff.Load() { // finish stopped it meanwhile: do not keep x alive
		t.Stop()
	}
}

// nextCheck is how long from now the stall timer is set for, elapsed
// since start and quiet since the last event: when the stall would be
// reached, or request_timeout if that comes first.
func (x *exchange) nextCheck(elapsed, quiet time.Duration) time.Duration {
	d := x.stallAfter - quiet
	if x.endBy > 0 {
		d = min(d, x.endBy-elapsed)
	}
	return d
}

// renewRest gives an upstream whose client is gone, and whose usage is
// known, afterUsageWait from now to end its stream (or repeat its report,
// which renews the wait again), then lets it go (errUsageKnown). clientLeft
// and the relay may both call it; the first arms the timer (x.rest).
func (x *exchange) renewRest() {
	if t := x.rest.Load(); t != nil {
		t.Reset(afterUsageWait)
		return
	}
	t := timerCancel(x, afterUsageWait, errUsageKnown)
	if !x.rest.CompareAndSwap(nil, t) {
		t.Stop()
		x.rest.Load().Reset(afterUsageWait)
	}
}

// stopRest stops the wait renewRest armed, if any.
func (x *exchange) stopRest() {
	if t := x.rest.Load(); t != nil {
		t.Stop()
	}
}

// timerCancel cancels x's upstream context with cause after d, unless
// stopped first.
func timerCancel(x *exchange, d time.Duration, cause error) *time.Timer {
	if cause == errRequestTimeout {
		return time.AfterFunc(d, x.timeUp)
	}
	return time.AfterFunc(d, func() { x.cancel(cause) })
}

// timeUp cuts the upstream off at request_timeout: nothing is left of it
// for another attempt, so the client gets this one's 504 (or its stream's
// error event), naming request_timeout, and its event is the request's.
// The wish is made only when wmu is free (a write to the client holds it
// up to write_timeout, and a client that has bytes gets no other attempt
// anyway); an attempt that follows nonetheless begins with nothing left,
// and is not sent (newExchange).
func (x *exchange) timeUp() {
	if x.wmu.TryLock() {
		x.canRetry = false
		x.wmu.Unlock()
	}
	x.cancel(errRequestTimeout)
}
