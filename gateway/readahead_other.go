//go:build !unix

package gateway

import "net"

// newReadAheadConn returns c: reading ahead takes the socket's raw reads
// (syscall.RawConn with non-blocking descriptors), which only Unix
// systems give; elsewhere net/http reads through its own buffer.
func newReadAheadConn(c net.Conn) net.Conn { return c }
