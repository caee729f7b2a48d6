package web

import "time"

// SetUsagePageLimit sets the rows a page of usage p's usage page asks the
// customer API for, for tests that cannot make 1,000 models.
func SetUsagePageLimit(p *Portal, n int) { p.usageLimit = n }

// SetSessionClock sets the clock p's sessions expire by.
func SetSessionClock(p *Portal, now func() time.Time) { p.sess.now = now }
