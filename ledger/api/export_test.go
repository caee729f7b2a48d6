package api

import "time"

// SetExportWait sets how long an export's write may wait for its client
// (ExportWriteTimeout by default), for tests that cannot wait a minute.
func SetExportWait(a *Admin, d time.Duration) { a.exportWait = d }

// SetListenerLimits sets l's ReadTimeout, the bytes of bodies it holds
// read ahead at once and how long a request waits for room among them,
// before l starts, for tests that cannot wait a minute or send 16 MiB.
func SetListenerLimits(l *Listener, readTimeout time.Duration, bodies int64, wait time.Duration) {
	l.readTimeout = readTimeout
	l.bodies = newBodyBudget(bodies, wait)
}

// BodiesHeld is the bytes of request bodies l holds read ahead now, and
// the most it ever held at once.
func BodiesHeld(l *Listener) (now, peak int64) { return l.bodies.held.Load(), l.bodies.peak.Load() }
