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
	wg         sync.WaitGroup
}

func newCache[T any](maxAge time.Duration) *cache[T] { return &cache[T]{maxAge: maxAge} }

// get returns the value for key, computing it with load when there is
// none fresh enough; fresh forces load. maxAge 0 always loads.
func (c *cache[T]) get(ctx context.Context, key string, fresh bool, load func(context.Context) (*T, error)) (*T, error) {
	c.mu.Lock()
	last := c.last
	switch {
	case c.maxAge <= 0 || fresh || last == nil || c.key != key:
		c.mu.Unlock()
		v, err := load(ctx)
		if err == nil {
			c.mu.Lock()
			c.last, c.key, c.at = v, key, time.Now()
			c.mu.Unlock()
		}
		return v, err
	case time.Since(c.at) > c.maxAge && !c.refreshing:
		c.refreshing = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			rctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
			defer cancel()
			v, err := load(rctx)
			c.mu.Lock()
			if err == nil {
				c.last, c.at = v, time.Now()
			}
			c.refreshing = false
			c.mu.Unlock()
		}()
	}
	c.mu.Unlock()
	return last, nil
}

// wait waits for a background recomputation to end.
func (c *cache[T]) wait() { c.wg.Wait() }
