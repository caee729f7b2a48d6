package gateway

import (
	"errors"
	"net/http"
	"os"
	"time"
)

// A client that stops reading its response.
//
// A write to a client blocks once the connection's buffers are full, and
// it is made under the exchange's wmu by the goroutine that relays the
// upstream: a client that opens a stream and then reads nothing would hold
// the relay, and so the request's usage event, for as long as it kept the
// connection open. Every write to the client therefore has a deadline,
// WriteTimeout after the write began, up to a second more: the deadline is
// moved on at most once a second, since a TCP connection's SetWriteDeadline
// took 129 ns against time.Since's 25 (BENCHMARKS.md, stop 26), twice a
// chunk otherwise. A write that misses it fails, the client is taken as
// gone, the upstream is read on for its usage as after a disconnect (see
// clientLeft), and the connection is closed.

// writeDeadlineEvery is how often, at most, a stream's write deadline is
// moved on.
const writeDeadlineEvery = time.Second

// armWriteDeadline moves the client connection's write deadline to
// WriteTimeout from now, unless it was moved less than writeDeadlineEvery
// ago. Call it under wmu before writing to the client.
func (x *exchange) armWriteDeadline() {
	now := time.Since(x.start)
	if x.writeDeadlineSet && now-x.writeDeadlineAt < writeDeadlineEvery {
		return
	}
	x.writeDeadlineSet, x.writeDeadlineAt = true, now
	_ = http.NewResponseController(x.w).SetWriteDeadline(time.Now().Add(x.s.cfg.WriteTimeout + writeDeadlineEvery))
}

// writeFailed records that a write to the client failed, err: the client
// is gone, and if the write missed its deadline, it stopped reading. Call
// it under wmu.
func (x *exchange) writeFailed(err error) {
	x.clientGone.Store(true)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		x.stoppedReading = true
	}
}

// SetWriteDeadline sets the deadline of the client connection's writes:
// net/http's until the connection is taken, then the connection's own.
func (t *takeover) SetWriteDeadline(d time.Time) error {
	if t.taken {
		return t.conn.SetWriteDeadline(d)
	}
	return http.NewResponseController(t.w).SetWriteDeadline(d)
}
