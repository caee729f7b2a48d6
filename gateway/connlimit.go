package gateway

import (
	"net"
	"syscall"

	"golang.org/x/net/netutil"
)

// reservedFiles is the file descriptors ConnectionCap leaves to the rest
// of the process: JetStream's stream files, the Postgres pool, the crash
// journal, the spool, the admin listener and the upstreams' idle pool.
const reservedFiles = 1024

// ConnectionCap is the client connections the gateway's listener holds at
// once: cfg.MaxConnections when set, otherwise what the process's
// RLIMIT_NOFILE leaves after reservedFiles and the upstream connections of
// MaxDrains streams read on after their clients left, divided by the
// descriptors a stream holds (2 when any provider is reached over
// HTTP/1.1 or HTTPS: the client's and the upstream's; 1 when every
// provider is on h2c, whose streams share connections). It is at least 64.
// cfg has been validated.
func ConnectionCap(cfg Config) int {
	if cfg.MaxConnections > 0 {
		return cfg.MaxConnections
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		lim.Cur = 1 << 20
	}
	perStream := 1
	for _, p := range cfg.Providers {
		if p.Protocol != ProtocolH2C {
			perStream = 2
		}
	}
	return max(64, (int(lim.Cur)-reservedFiles-cfg.MaxDrains)/perStream)
}

// limitListener caps ln at n connections at once (golang.org/x/net's
// netutil.LimitListener: Accept waits while n are open).
func limitListener(ln net.Listener, n int) net.Listener {
	return netutil.LimitListener(ln, n)
}
