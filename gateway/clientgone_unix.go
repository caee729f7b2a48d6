//go:build unix

package gateway

import (
	"errors"
	"syscall"
)

// peekHungUp peeks at rc's socket without waiting: its peer closed it when
// a read would return end of stream (0 bytes) or fail with anything but
// EAGAIN (nothing to read yet) or EINTR. Control does not take the
// descriptor's read lock, which net/http's background read may hold.
func peekHungUp(rc syscall.RawConn) bool {
	gone := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			gone = err == nil && n == 0 || err != nil && !errors.Is(err, syscall.EAGAIN)
			return
		}
	})
	return gone
}
