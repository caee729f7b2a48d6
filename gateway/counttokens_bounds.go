package gateway

import (
	"context"
	"errors"
	"io"
	"time"
)

// countBound is the clock of a token count's attempt, as a non-streamed
// request's: its wait for the headers (headerWait: connect_timeout, or
// stall_timeout when longer, since a count's headers come with its whole
// answer), then the stall timer on its body (stall_timeout of silence at
// a time). request_timeout, from the count's arrival, bounds both: it is
// the deadline of the context countBounds is given (countCall).
type countBound struct {
	pc     *ProviderConfig
	cancel context.CancelCauseFunc
	timer  *time.Timer // the headers' wait, then the stall timer
}

// countBounds starts the wait for the headers of a count's attempt on pc
// under parent; the context returned ends, with the bound's error for its
// cause, when a bound is passed.
func countBounds(parent context.Context, pc *ProviderConfig) (context.Context, *countBound) {
	ctx, cancel := context.WithCancelCause(parent)
	wait, cause := headerWait(pc, false, 0, 0)
	b := &countBound{pc: pc, cancel: cancel}
	b.timer = time.AfterFunc(wait, func() { cancel(cause) })
	return ctx, b
}

// answered ends the wait for the headers and arms the stall timer, which
// each read that brings bytes (reader) sets again.
func (b *countBound) answered() {
	b.timer.Stop()
	b.timer = time.AfterFunc(b.pc.StallTimeout, func() { b.cancel(errStalled) })
}

// reader is body read under the stall timer (touch).
func (b *countBound) reader(body io.Reader) io.Reader { return touchReader{b, body} }

// touch sets the stall timer again, as bytes came: a count's body is
// small, so the timer is simply reset (a request's exchange.touch marks
// the time instead, for a stream's many events).
func (b *countBound) touch() { b.timer.Reset(b.pc.StallTimeout) }

// stop ends the bounds, and the context, once the attempt is over.
func (b *countBound) stop() {
	b.timer.Stop()
	b.cancel(nil)
}

// timedOut reports whether cause, why an upstream's context ended, is a
// bound passed (connect_timeout, stall_timeout, request_timeout): a 504.
func timedOut(cause error) bool {
	return errors.Is(cause, errConnectTimeout) || errors.Is(cause, errAnswerTimeout) || errors.Is(cause, errStalled)
}
