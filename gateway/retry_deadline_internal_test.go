package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestNoRetryOnceRequestTimeoutRanOut: an attempt whose upstream context
// ended at request_timeout is not retried, whatever failure it then
// reports. The request_timeout timer turns retry off only when it can take
// wmu at once (timeUp's TryLock); when it could not, the attempt's failure
// went to a next attempt that began with nothing left, whose 504 event
// named a deployment that was never asked and counted in its
// upstream_errors.
func TestNoRetryOnceRequestTimeoutRanOut(t *testing.T) {
	for _, tc := range []struct {
		cause error
		want  bool
	}{{nil, true}, {errRequestTimeout, false}, {errors.New("stall"), true}} {
		ctx, cancel := context.WithCancelCause(context.Background())
		x := &exchange{ctx: ctx, cancel: cancel, canRetry: true, retryUntil: time.Now().Add(time.Minute)}
		x.clientGone.Store(false)
		if tc.cause != nil {
			cancel(tc.cause)
		}
		if got := x.mayRetry(); got != tc.want {
			t.Errorf("cause %v: mayRetry = %v, want %v", tc.cause, got, tc.want)
		}
		cancel(nil)
	}
}

// TestNoRetryOnceTheClientHasAByte: an attempt's failure goes to another
// deployment only while the client has nothing of its answer (no status
// line written), is there, was not cut off, and the retry budget lasts.
// The relays check their own start too; a mutant dropping the started
// check here passed every failover test, which left one guard between a
// client's half-sent 200 and a second answer appended to it.
func TestNoRetryOnceTheClientHasAByte(t *testing.T) {
	for name, edit := range map[string]func(x *exchange){
		"none":         func(x *exchange) {},
		"started":      func(x *exchange) { x.started = true },
		"cut off":      func(x *exchange) { x.cut = true },
		"client gone":  func(x *exchange) { x.clientGone.Store(true) },
		"budget spent": func(x *exchange) { x.retryUntil = time.Now().Add(-time.Millisecond) },
		"last attempt": func(x *exchange) { x.canRetry = false },
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		x := &exchange{ctx: ctx, cancel: cancel, canRetry: true, retryUntil: time.Now().Add(time.Minute)}
		edit(x)
		if got, want := x.mayRetry(), name == "none"; got != want {
			t.Errorf("%s: mayRetry = %v, want %v", name, got, want)
		}
		cancel(nil)
	}
}
