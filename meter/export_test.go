package meter

// Restart restarts e's server as a failed store makes it, for tests of
// its clients.
func (e *Embedded) Restart() error { return e.restart() }
