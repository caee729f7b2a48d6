//go:build linux

package api_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestAdminListenerLeavesTheProcessItsFiles: clients that open connections
// to the admin listener (every role's /metrics, /healthz and /readyz; no
// credentials needed to connect) and send nothing must not take the
// process's file descriptors: its embedded JetStream store, crash journal,
// spool segments and Postgres connections need them. The gateway's LLM
// listener is capped for that (gateway.ConnectionCap leaves the rest of the
// process 1,024); the admin listener took every connection offered: a
// review held 400 idle ones on a `tollgate serve` with 256 descriptors,
// and every JetStream store failed ("Critical write error: open
// .../index.db: too many open files"), every usage event went to the
// spool, the LLM listener could not accept, and the embedded server could
// not restart until they closed.
func TestAdminListenerLeavesTheProcessItsFiles(t *testing.T) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	const clients = 1200
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	want := uint64(len(ents) + clients + 600) // the clients' own, and room for what the listener holds
	if lim.Max < want {
		t.Skipf("RLIMIT_NOFILE's hard limit %d is below the %d this test needs", lim.Max, want)
	}
	low := lim
	low.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })

	l := api.NewListener(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(t.Context()) })

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range clients {
		c, err := net.DialTimeout("tcp", l.Addr(), time.Second)
		if err != nil {
			break // the kernel's backlog is full: the clients hold what they can
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond) // the listener accepts what it will
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatalf("with %d idle connections to the admin listener, the process cannot open a file: %v", len(conns), err)
	}
	f.Close()

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + l.Addr() + "/healthz")
	if err != nil {
		t.Fatalf("once the clients left, the listener does not answer: %v", err)
	}
	resp.Body.Close()
}
