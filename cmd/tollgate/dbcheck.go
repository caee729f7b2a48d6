package main

import (
	"context"
	"errors"
	"sync"
	"time"
)

// dbCheckTimeout bounds one check of the database: a Postgres that does
// not answer within it counts as down.
const dbCheckTimeout = time.Second

// dbCheck runs a process's check of its ledger database for GET /readyz
// and tollgate_database_up, one at a time: a caller that comes while a
// check runs waits for it and takes its result, so however often the two
// endpoints are called (a flood of them, on a listener anyone can reach),
// they hold at most one of the pool's connections. A caller that comes
// after a check ended runs one of its own: no answer comes from a check
// that ended before its request. The check runs under its own deadline
// (dbCheckTimeout), not its first caller's context: a caller that leaves
// does not cancel it for the others.
type dbCheck struct {
	check func(context.Context) error

	mu      sync.Mutex
	running *dbCheckRun // nil when no check runs
	stopped bool        // no check starts after stop
	wg      sync.WaitGroup
}

// errDBCheckStopped is run's error once the process is stopping.
var errDBCheckStopped = errors.New("the process is stopping")

// dbCheckRun is one check: done is closed once err is set.
type dbCheckRun struct {
	done chan struct{}
	err  error
}

// newDBCheck returns a dbCheck that runs check (ledger.Store's Ping or
// CheckTables).
func newDBCheck(check func(context.Context) error) *dbCheck {
	return &dbCheck{check: check}
}

// run returns the error of a check of the database that ended after run
// was called (nil: it answered), or ctx's error when ctx ends first.
func (c *dbCheck) run(ctx context.Context) error {
	c.mu.Lock()
	r := c.running
	if r == nil {
		if c.stopped {
			c.mu.Unlock()
			return errDBCheckStopped
		}
		r = &dbCheckRun{done: make(chan struct{})}
		c.running = r
		c.wg.Go(func() { c.do(r) })
		c.mu.Unlock()
	} else {
		c.mu.Unlock()
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do runs the check r, twice if the first try fails, and publishes its
// result. It runs on its own goroutine, which ends within dbCheckTimeout
// (the pool's Ping and queries return once their context ends), and which
// stop waits for.
func (c *dbCheck) do(r *dbCheckRun) {
	ctx, cancel := context.WithTimeout(context.Background(), dbCheckTimeout)
	r.err = c.check(ctx)
	if r.err != nil && ctx.Err() == nil {
		// Once more, within the same second: the pool hands out a
		// connection it holds, which a restarted Postgres (or a cut
		// network) has closed; it drops it on the failure, and the second
		// try opens a new one.
		r.err = c.check(ctx)
	}
	cancel()
	c.mu.Lock()
	c.running = nil
	c.mu.Unlock()
	close(r.done)
}

// up reports whether a check run now passes (tollgate_database_up).
func (c *dbCheck) up() bool { return c.run(context.Background()) == nil }

// stop starts no check from now on (run answers errDBCheckStopped) and
// waits for the one running, if any, until ctx ends: before the store it
// checks is closed.
func (c *dbCheck) stop(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
