//go:build unix

package gateway

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// readAhead is the most, in bytes, that one read from an upstream socket
// takes in (net/http's own reads are bounded by the transport's
// ReadBufferSize, upstreamReadBuffer).
const readAhead = 16 << 10

// readAheadBufs holds the read-ahead buffers (*[readAhead]byte) of the
// upstream connections that have bytes read and not yet taken.
var readAheadBufs = sync.Pool{New: func() any { return new([readAhead]byte) }}

// readAheadConn is an upstream TCP connection whose reads from the socket
// take in up to readAhead bytes, whatever the size of the caller's buffer,
// and hand out what the caller did not take at its next reads, without
// another system call.
//
// net/http reads an HTTP/1.1 response through a buffer of the transport's
// ReadBufferSize, which the connection holds for its life, idle or not;
// when events arrive faster than they are relayed, each read system call
// took in no more than that buffer (2 KiB): a third more reads per chunk
// than the bare proxy's 4 KiB at 100 unpaced streams. A readAheadConn
// holds a buffer only while it has bytes the caller has not taken: a read
// that finds none waits for the socket to be readable before it takes a
// buffer from the pool (syscall.RawConn), so an idle stream holds none.
//
// Reads are not safe for concurrent use (net/http reads a connection from
// one goroutine); writes, Close and deadlines are the net.Conn's own.
type readAheadConn struct {
	net.Conn
	raw syscall.RawConn

	buf     *[readAhead]byte // from readAheadBufs while pending holds bytes of it
	pending []byte
	// readFD (a method value made once: a closure per read would be an
	// allocation) leaves its result here.
	readFD func(fd uintptr) bool
	n      int
	rerr   error
}

// newReadAheadConn wraps c if it is a TCP connection; otherwise it
// returns c.
func newReadAheadConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rc := &readAheadConn{Conn: c, raw: raw}
	rc.readFD = rc.read
	return rc
}

// Read reads into p what an earlier read took in and p did not hold, or
// else up to readAhead bytes from the socket. It returns io.EOF at the
// end of the stream, and the errors of net.Conn's Read otherwise (a
// *net.OpError, os.ErrDeadlineExceeded inside for a deadline).
func (c *readAheadConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		return c.take(p), nil
	}
	if len(p) >= readAhead || len(p) == 0 {
		return c.Conn.Read(p)
	}
	c.n, c.rerr = 0, nil
	if err := c.raw.Read(c.readFD); err != nil {
		return 0, c.opError(err)
	}
	switch {
	case c.rerr != nil:
		return 0, c.opError(os.NewSyscallError("read", c.rerr))
	case c.n == 0:
		return 0, io.EOF
	}
	return c.take(p), nil
}

// read is the raw read of Read, made by syscall.RawConn: it reads the
// socket into a buffer from the pool, into c.n and c.rerr, and reports
// false, to be called again once the socket is readable, when there was
// nothing to read (holding no buffer meanwhile).
func (c *readAheadConn) read(fd uintptr) bool {
	buf := readAheadBufs.Get().(*[readAhead]byte)
	for {
		c.n, c.rerr = syscall.Read(int(fd), buf[:])
		if c.rerr != syscall.EINTR {
			break
		}
	}
	if c.rerr == syscall.EAGAIN {
		readAheadBufs.Put(buf)
		return false
	}
	if c.n > 0 {
		c.buf, c.pending = buf, buf[:c.n]
	} else {
		readAheadBufs.Put(buf)
	}
	return true
}

// take copies pending bytes into p, and returns the buffer to the pool
// once none is left.
func (c *readAheadConn) take(p []byte) int {
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	if len(c.pending) == 0 {
		readAheadBufs.Put(c.buf)
		c.buf, c.pending = nil, nil
	}
	return n
}

func (c *readAheadConn) opError(err error) error {
	return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
