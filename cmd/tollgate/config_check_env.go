package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/tollgate-dev/tollgate/ledger"
)

// envProblems lists what in the environment a process started now could
// not use, one sentence each naming the variable: each value loadEnv
// refuses (TOLLGATE_SHUTDOWN_GRACE, TOLLGATE_PPROF), a listen address
// (TOLLGATE_LISTEN, TOLLGATE_ADMIN_LISTEN) that is not host:port with a
// port from 0 to 65535 or a service name, and a TOLLGATE_DATABASE_URL
// that ledger.Open would refuse before it connects (ledger.CheckURL), and TOLLGATE_LOG_LEVEL (which stops any other command before
// it runs), and a variable whose name is a near miss of one of these
// (misspeltEnv).
func envProblems() []string {
	problems := misspeltEnv(os.Environ())
	if _, err := newLogger(io.Discard, os.Getenv("TOLLGATE_LOG_LEVEL")); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := shutdownGrace(os.Getenv("TOLLGATE_SHUTDOWN_GRACE")); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := pprofOn(os.Getenv("TOLLGATE_PPROF")); err != nil {
		problems = append(problems, err.Error())
	}
	for _, name := range []string{"TOLLGATE_LISTEN", "TOLLGATE_ADMIN_LISTEN"} {
		if addr := os.Getenv(name); addr != "" { // else the default
			if err := listenAddress(name, addr); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	if u := os.Getenv("TOLLGATE_DATABASE_URL"); u != "" {
		if err := ledger.CheckURL(u); err != nil {
			problems = append(problems, fmt.Sprintf("TOLLGATE_DATABASE_URL: %v", err))
		}
	}
	return problems
}

// listenAddress returns an *envError naming variable name when addr is
// not host:port with a port from 0 to 65535 or a service name.
func listenAddress(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port) // a number up to 65535, or a service name (/etc/services)
	}
	if err != nil {
		return &envError{fmt.Sprintf("%s=%q: want host:port or :port, such as :8080 or 127.0.0.1:8080", name, addr)}
	}
	return nil
}
