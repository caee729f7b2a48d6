package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersReuseGoroutines: functions done one after another run on one
// kept goroutine; at most maxIdleWorkers wait; stop ends the idle ones,
// and wait returns once the busy ones' functions have returned; a function
// done after stop still runs.
func TestWorkersReuseGoroutines(t *testing.T) {
	var ws workers
	var first *worker
	for i := range 100 {
		done := make(chan struct{})
		ws.do(func() { close(done) })
		<-done
		waitIdle(t, &ws, 1)
		ws.mu.Lock()
		w := ws.idle[0]
		ws.mu.Unlock()
		if first == nil {
			first = w
		} else if w != first {
			t.Fatalf("run %d ran on a new goroutine, not the kept one", i)
		}
	}

	// Concurrent functions each take a goroutine; all come back to wait.
	const n = 50
	var wg sync.WaitGroup
	release := make(chan struct{})
	var started atomic.Int64
	for range n {
		wg.Add(1)
		ws.do(func() { defer wg.Done(); started.Add(1); <-release })
	}
	for started.Load() < n {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	waitIdle(t, &ws, n)

	// A busy function holds wait until it returns.
	busy := make(chan struct{})
	var finished atomic.Bool
	ws.do(func() { <-busy; finished.Store(true) })
	ws.stop()
	if got := idleCount(&ws); got != 0 {
		t.Fatalf("%d idle after stop", got)
	}
	waited := make(chan struct{})
	go func() { ws.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while a function ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(busy)
	<-waited
	if !finished.Load() {
		t.Fatal("wait returned before the busy function did")
	}

	ran := make(chan struct{})
	ws.do(func() { close(ran) })
	<-ran
	ws.wait()
	if got := idleCount(&ws); got != 0 {
		t.Fatalf("a goroutine after stop was kept: %d idle", got)
	}
}

// TestWorkersBounded: no more than maxIdleWorkers wait, and the oldest,
// idle past workerIdleLimit, ends when another comes back.
func TestWorkersBounded(t *testing.T) {
	var ws workers
	defer func() { ws.stop(); ws.wait() }()
	n := maxIdleWorkers + 10
	burst(&ws, n)
	waitIdle(t, &ws, maxIdleWorkers)
	time.Sleep(20 * time.Millisecond)
	if got := idleCount(&ws); got != maxIdleWorkers {
		t.Fatalf("%d idle, want the cap %d", got, maxIdleWorkers)
	}

	// Age the oldest past the limit: the next to come back ends it.
	ws.mu.Lock()
	oldest := ws.idle[0]
	oldest.since = time.Now().Add(-2 * workerIdleLimit)
	ws.mu.Unlock()
	done := make(chan struct{})
	ws.do(func() { close(done) }) // takes the newest; it comes back
	<-done
	waitIdle(t, &ws, maxIdleWorkers-1)
	ws.mu.Lock()
	for _, w := range ws.idle {
		if w == oldest {
			t.Error("the worker idle past the limit is still kept")
		}
	}
	ws.mu.Unlock()
}

// TestWorkersEndIdleOnesWithoutTraffic: the goroutines a burst left
// waiting end once idle past the limit, though no request comes back to
// end them: 200 kept after a burst, each with the stack its request grew,
// waited for ever on a gateway that went quiet (up to maxIdleWorkers).
func TestWorkersEndIdleOnesWithoutTraffic(t *testing.T) {
	ws := workers{idleLimit: 100 * time.Millisecond}
	defer func() { ws.stop(); ws.wait() }()
	const n = 200
	burst(&ws, n)
	waitIdle(t, &ws, n)
	for deadline := time.Now().Add(3 * time.Second); idleCount(&ws) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still wait 3 s after a burst, idle past their %s limit", idleCount(&ws), ws.idleLimit)
		}
	}
}

// burst runs n functions on ws at once, each holding its goroutine until
// all have one, and returns when they have returned.
func burst(ws *workers, n int) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range n {
		wg.Add(1)
		ws.do(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
}

func idleCount(ws *workers) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.idle)
}

// waitIdle waits until n goroutines wait (a function's goroutine comes
// back just after the function returns).
func waitIdle(t *testing.T, ws *workers, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for idleCount(ws) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle, want %d", idleCount(ws), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWorkersAside: aside returns once f has returned, runs f on a kept
// goroutine (the same one, call after call, not the caller's), raises f's
// panic again in the caller, and still runs f after stop.
func TestWorkersAside(t *testing.T) {
	var ws workers
	var kept *worker
	for i := range 10 {
		var ran bool
		ws.aside(func() { ran = true })
		if !ran {
			t.Fatalf("call %d: aside returned before f ran", i)
		}
		waitIdle(t, &ws, 1)
		ws.mu.Lock()
		w := ws.idle[0]
		ws.mu.Unlock()
		if kept == nil {
			kept = w
		} else if w != kept {
			t.Fatalf("call %d ran on a new goroutine, not the kept one", i)
		}
	}

	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want f's panic", p)
			}
		}()
		ws.aside(func() { panic("boom") })
		t.Fatal("aside returned after f panicked")
	}()
	waitIdle(t, &ws, 1) // the goroutine survived the panic and came back

	ws.stop()
	var ran bool
	ws.aside(func() { ran = true })
	ws.wait()
	if !ran || idleCount(&ws) != 0 {
		t.Fatalf("after stop: ran %v, %d idle", ran, idleCount(&ws))
	}
}

// BenchmarkAside: a call about 4.3 KiB deep (8 frames of 512 bytes and
// more; net/http's client round trip and its first header write are 3 to
// 4 KiB) run aside on a new goroutine each time, as it once was, and on a
// kept one (workers.aside). The new goroutine's stack grows, and is
// copied, on every call.
func BenchmarkAside(b *testing.B) {
	b.Run("new-goroutine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			done := make(chan any)
			go func() {
				defer func() { done <- recover() }()
				deep(7)
			}()
			<-done
		}
	})
	b.Run("kept", func(b *testing.B) {
		var ws workers
		defer func() { ws.stop(); ws.wait() }()
		b.ReportAllocs()
		for b.Loop() {
			ws.aside(func() { deep(7) })
		}
	})
}

// deep recurses n frames of 512 bytes each.
//
//go:noinline
func deep(n int) byte {
	var pad [512]byte
	pad[n] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n]
}
