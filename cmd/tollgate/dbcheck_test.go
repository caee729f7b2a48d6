package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDBCheckOneAtATime: callers that come while a check of the database
// runs wait for it and take its result, so a flood of /readyz or
// /metrics requests holds one of the pool's connections, not one each
// (before, every /readyz ran its own query, up to the pool's size). A
// caller that comes after it ended runs a check of its own: the answer
// is never older than the request.
func TestDBCheckOneAtATime(t *testing.T) {
	var calls, running, most atomic.Int32
	release := make(chan struct{})
	down := errors.New("connection refused")
	c := newDBCheck(func(ctx context.Context) error {
		calls.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the check runs without a deadline")
		}
		<-release
		return down
	})
	const callers = 50
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { errs[i] = c.run(context.Background()) })
	}
	for deadline := time.Now().Add(5 * time.Second); calls.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no check started")
		}
	}
	time.Sleep(50 * time.Millisecond) // the other callers arrive and wait
	close(release)
	wg.Wait()
	if got := most.Load(); got != 1 {
		t.Errorf("%d checks ran at once; want 1", got)
	}
	if got := calls.Load(); got >= callers/2 {
		t.Errorf("%d checks for %d callers that came while one ran; want them to share it", got, callers)
	}
	for i, err := range errs {
		if !errors.Is(err, down) {
			t.Fatalf("caller %d got %v; want the check's error", i, err)
		}
	}
	before := calls.Load()
	if err := c.run(context.Background()); !errors.Is(err, down) || calls.Load() == before {
		t.Errorf("a caller after the check ended: %v, %d checks (was %d); want a check of its own", err, calls.Load(), before)
	}
	if c.up() {
		t.Error("up() with the database down; want false")
	}
}

// TestDBCheckCallerLeaves: a caller whose request ends while it waits for
// the running check returns at once with its context's error; the check
// goes on for the others and is not cancelled by the first caller's
// context either.
func TestDBCheckCallerLeaves(t *testing.T) {
	release := make(chan struct{})
	var cancelled atomic.Bool
	c := newDBCheck(func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			cancelled.Store(true)
			return ctx.Err()
		}
	})
	first, cancelFirst := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() { firstErr <- c.run(first) }()
	time.Sleep(20 * time.Millisecond)
	second, cancelSecond := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelSecond()
	if err := c.run(second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a waiting caller whose context ended: %v; want its context's error", err)
	}
	cancelFirst()
	time.Sleep(20 * time.Millisecond)
	close(release)
	if err := <-firstErr; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the first caller: %v", err)
	}
	if cancelled.Load() {
		t.Error("the check was cancelled with its first caller's request; want it to run for the callers that share it")
	}
	if !c.up() {
		t.Error("up() after a check that passed; want true")
	}
}

// TestDBCheckTriesTwice: a check whose first try fails (the pool's
// connection closed by a Postgres that restarted) tries once more within
// its second, so the first /readyz or scrape after an outage says "up"; a
// database that stays down fails both.
func TestDBCheckTriesTwice(t *testing.T) {
	var calls atomic.Int32
	stale := errors.New("unexpected EOF")
	c := newDBCheck(func(context.Context) error {
		if calls.Add(1) == 1 {
			return stale
		}
		return nil
	})
	if err := c.run(context.Background()); err != nil || calls.Load() != 2 {
		t.Errorf("a first try that fails, then one that passes: %v after %d tries; want nil after 2", err, calls.Load())
	}
	c = newDBCheck(func(context.Context) error { calls.Add(1); return stale })
	calls.Store(0)
	if err := c.run(context.Background()); !errors.Is(err, stale) || calls.Load() != 2 {
		t.Errorf("a database that stays down: %v after %d tries; want its error after 2", err, calls.Load())
	}
}

// TestDBCheckStopWaits: the check's goroutine is the process's to wait
// for: stop waits for the one running, before the store it checks is
// closed, and no check starts after it.
func TestDBCheckStopWaits(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var ended atomic.Bool
	c := newDBCheck(func(context.Context) error {
		close(started)
		<-release
		ended.Store(true)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = c.run(ctx) }()
	<-started
	cancel() // its caller left; the check runs on
	stopped := make(chan error, 1)
	go func() { stopped <- c.stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("stop returned (%v) while the check ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil || !ended.Load() {
		t.Fatalf("stop: %v, the check ended %t; want nil once it ended", err, ended.Load())
	}
	if err := c.run(context.Background()); !errors.Is(err, errDBCheckStopped) {
		t.Errorf("a check after stop: %v; want errDBCheckStopped", err)
	}
}
