package web

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCache: a first asynchronous get starts the computation and returns
// nothing; once it is done the value is served; a stale value is served
// while the next is computed; fresh waits for a new one; a failed load
// keeps the last value; another key is computed anew.
func TestCache(t *testing.T) {
	c := newCache[int](time.Hour)
	ctx := context.Background()
	calls := 0
	load := func(context.Context) (*int, error) { calls++; v := calls; return &v, nil }
	if v, err := c.get(ctx, "k", false, true, load); v != nil || err != nil {
		t.Fatalf("first async get = %v %v, want nothing yet", v, err)
	}
	c.wg.Wait()
	if v, _ := c.get(ctx, "k", false, true, load); v == nil || *v != 1 {
		t.Fatalf("after the background load: %v, want 1", v)
	}
	if v, _ := c.get(ctx, "k", true, true, load); v == nil || *v != 2 {
		t.Fatalf("fresh get = %v, want a new value 2", v)
	}
	c.mu.Lock()
	c.at = time.Now().Add(-2 * time.Hour) // stale
	c.mu.Unlock()
	if v, _ := c.get(ctx, "k", false, true, load); v == nil || *v != 2 {
		t.Fatalf("stale get = %v, want the stale 2 while 3 is computed", v)
	}
	c.wg.Wait()
	if v, _ := c.get(ctx, "k", false, true, load); v == nil || *v != 3 {
		t.Fatalf("after the refresh: %v, want 3", v)
	}
	if v, err := c.get(ctx, "k", true, true, func(context.Context) (*int, error) { return nil, errors.New("down") }); err == nil || v != nil {
		t.Fatalf("failed load = %v %v, want its error", v, err)
	}
	if v, _ := c.get(ctx, "k", false, true, load); v == nil || *v != 3 {
		t.Fatalf("after a failed load: %v, want the last value 3", v)
	}
	if v, _ := c.get(ctx, "other", false, false, load); v == nil || *v != 4 {
		t.Fatalf("synchronous get of another key = %v, want 4", v)
	}
}

// TestCacheCloseCancelsTheRefresh: close ends a background recomputation
// (it would otherwise hold the process's stop for up to refreshTimeout).
func TestCacheCloseCancelsTheRefresh(t *testing.T) {
	c := newCache[int](time.Hour)
	started := make(chan struct{})
	load := func(ctx context.Context) (*int, error) { close(started); <-ctx.Done(); return nil, ctx.Err() }
	if _, err := c.get(context.Background(), "k", false, true, load); err != nil {
		t.Fatal(err)
	}
	<-started
	done := make(chan struct{})
	go func() { c.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not end the background recomputation")
	}
}

// TestCacheShowsAFailedComputation (a review): a background computation
// that failed with no value to show (the overview's month figures with the
// database down, or past refreshTimeout on a large ledger) was dropped:
// every view showed "computing" and started the whole computation again.
// Its error is returned for failBackoff, with no new computation; then
// the next view starts one, and its value is served once computed.
func TestCacheShowsAFailedComputation(t *testing.T) {
	c := newCache[int](time.Hour)
	ctx := context.Background()
	calls := 0
	failing := func(context.Context) (*int, error) { calls++; return nil, errors.New("database unreachable") }
	if v, err := c.get(ctx, "k", false, true, failing); v != nil || err != nil {
		t.Fatalf("first async get = %v %v, want nothing yet", v, err)
	}
	c.wg.Wait()
	for range 3 {
		if v, err := c.get(ctx, "k", false, true, failing); v != nil || err == nil || err.Error() != "database unreachable" {
			t.Fatalf("a view after the failed computation = %v %v, want its error", v, err)
		}
	}
	c.wg.Wait()
	if calls != 1 {
		t.Fatalf("%d computations; want the one, the views within the backoff starting none", calls)
	}
	c.mu.Lock()
	c.failedAt = time.Now().Add(-failBackoff) // the backoff is over
	c.mu.Unlock()
	load := func(context.Context) (*int, error) { calls++; v := 7; return &v, nil }
	if v, err := c.get(ctx, "k", false, true, load); v != nil || err != nil {
		t.Fatalf("a view past the backoff = %v %v, want a new computation begun", v, err)
	}
	c.wg.Wait()
	if v, err := c.get(ctx, "k", false, true, load); v == nil || *v != 7 || err != nil {
		t.Fatalf("after it = %v %v, want its value", v, err)
	}
}

// TestCacheFailureIsItsKeysOnly: a failed background computation is
// shown for its own key only: a view for another key (the overview of a
// new month) starts that key's computation rather than getting the other
// key's error. A mutation audit: a backoff that ignored the key passed
// every test.
func TestCacheFailureIsItsKeysOnly(t *testing.T) {
	c := newCache[int](time.Hour)
	ctx := context.Background()
	failing := func(context.Context) (*int, error) { return nil, errors.New("down") }
	_, _ = c.get(ctx, "2026-01", false, true, failing)
	c.wg.Wait()
	if v, err := c.get(ctx, "2026-02", false, true, func(context.Context) (*int, error) { v := 1; return &v, nil }); v != nil || err != nil {
		t.Fatalf("a view of another key after a failure = %v %v, want its computation begun, no error", v, err)
	}
	c.wg.Wait()
}
