package api

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowWater sets c's TCP_NOTSENT_LOWAT to notSentLowWater (Linux, tcp(7)):
// a write to it blocks once that many bytes wait unsent, and wakes once
// half of them have gone, rather than once a third of a send buffer
// autotuned to megabytes has drained. An export's write then waits on its
// client for as long as the client takes to read a few KiB, not a
// megabyte, so the export's write timeout measures the client's pauses,
// not its pace. What is in flight (sent, not yet acknowledged) is not
// bounded by it: a fast client over a long path is not slowed. Best
// effort: a connection that is not TCP, or a kernel without the option,
// keeps its defaults.
func lowWater(c net.Conn) {
	sc, ok := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowWater)
	})
}
