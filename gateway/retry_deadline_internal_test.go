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
