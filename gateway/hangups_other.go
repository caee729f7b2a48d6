//go:build !linux

package gateway

import (
	"errors"
	"syscall"
)

// hangups is the epoll poller of taken streams' connections, on Linux
// alone: elsewhere each taken stream has a goroutine of its own waiting on
// its connection (see takeover.watch).
type hangups struct{}

func newHangups(func(*takeover, bool)) (*hangups, error) {
	return nil, errors.ErrUnsupported
}

func (*hangups) add(*takeover, syscall.RawConn) (uint64, bool) { return 0, false }
func (*hangups) remove(uint64, syscall.RawConn)                {}
func (*hangups) stop()                                         {}
