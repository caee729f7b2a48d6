//go:build !linux

package api

import "net"

// lowWater does nothing where TCP_NOTSENT_LOWAT is not set (see
// lowat_linux.go): the kernel's send buffer decides how long a write
// waits.
func lowWater(net.Conn) {}
