//go:build !unix

package gateway

import "syscall"

// peekHungUp cannot peek at a socket here: it reports false.
func peekHungUp(syscall.RawConn) bool { return false }
