package web

import (
	"context"
	"sync"
	"time"
)

// refreshTimeout bounds a background recomputation.
const refreshTimeout = 5 * time.Minute

// cache keeps the last value a page computed from whole-ledger queries
// (the overview's month figures, the reconciliation of the last day) for
// maxAge. An older value is still served while a new one is computed in
// the background, one at a time; a value for another key (a new month),
// or none yet, is computed while the request waits.
type cache[T any] struct {
	maxAge     time.Duration
	mu         sync.Mutex
	last       *T
	key        string
	at         time.Time
	refreshing bool
	// failed is the error of the last background computation for
	// failedKey, at failedAt, while there is no value for that key: a view
	// within failBackoff of it gets the error, not "computing" again.
	failed    error
	failedKey string
	failedAt  time.Time
	wg        sync.WaitGroup
	// base is the background recomputations' context, ended by stop.
	base context.Context
	stop context.CancelFunc
}

func newCache[T any](maxAge time.Duration) *cache[T] {
	base, stop := context.WithCancel(context.Background())
	return &cache[T]{maxAge: maxAge, base: base, stop: stop}
}

// failBackoff is how long a background computation's error is shown
// before a view starts another.
const failBackoff = 30 * time.Second

// get returns the value for key, computing it with load when there is
// none fresh enough: a stale value is returned at once while a new one is
// computed in the background. When there is no value for key yet, get
// waits for load unless async, in which case it starts load in the
// background and returns nil; once that load has failed, get returns its
// error for failBackoff, then starts another (before, the error was
// dropped and each view of the page started the computation again,
// "computing" for ever: a review). fresh forces load (waiting); maxAge 0
// always loads.
func (c *cache[T]) get(ctx context.Context, key string, fresh, async bool, load func(context.Context) (*T, error)) (*T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last *T
	if c.key == key {
		last = c.last
	}
	if async && !fresh && last == nil && c.failed != nil && c.failedKey == key && time.Since(c.failedAt) < failBackoff {
		return nil, c.failed
	}
	switch {
	case c.maxAge <= 0 || fresh || (last == nil && !async):
		c.mu.Unlock()
		v, err := load(ctx)
		c.mu.Lock()
		if err == nil {
			c.last, c.key, c.at = v, key, time.Now()
		}
		return v, err
	case (last == nil || time.Since(c.at) > c.maxAge) && !c.refreshing:
		c.refreshing = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			rctx, cancel := context.WithTimeout(c.base, refreshTimeout)
			defer cancel()
			v, err := load(rctx)
			c.mu.Lock()
			if err == nil {
				c.last, c.key, c.at, c.failed = v, key, time.Now(), nil
			} else {
				c.failed, c.failedKey, c.failedAt = err, key, time.Now()
			}
			c.refreshing = false
			c.mu.Unlock()
		}()
	}
	return last, nil
}

// close cancels a background recomputation, if one runs, and waits for
// it to end.
func (c *cache[T]) close() {
	c.stop()
	c.wg.Wait()
}

// parallel runs the calls at once and returns the first error of the
// first call that failed (in the order given), once all have returned: a
// page's independent API calls take as long as the slowest.
func parallel(calls ...func() error) error {
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { errs[i] = call() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
