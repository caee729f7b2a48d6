package api

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// authLogEvery is the least time between two log lines about failed admin
// authentications: a client guessing tokens cannot flood the log, and the
// operator still sees that it is happening, from where, and how often.
const authLogEvery = time.Second

// authFailures logs the admin API's failed authentications at WARN, at
// most once per authLogEvery, counting in each line those since the last.
type authFailures struct {
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	last     time.Time // when the last line was written
	unlogged int       // failures since the last line, not yet written
}

// failed records one failed authentication of r and writes a line when
// authLogEvery has passed since the last. The line has the failure's
// remote address, method and path, and "failures": how many failed since
// the previous line, this one included. The token sent is never logged.
func (f *authFailures) failed(r *http.Request, reason string) {
	now := f.now()
	f.mu.Lock()
	f.unlogged++
	if now.Sub(f.last) < authLogEvery {
		f.mu.Unlock()
		return
	}
	n := f.unlogged
	f.last, f.unlogged = now, 0
	f.mu.Unlock()
	f.log.Warn("admin authentication failed", "remote_addr", r.RemoteAddr, "method", r.Method,
		"path", r.URL.Path, "reason", reason, "failures", n)
}
