package gateway

import (
	"sync"
	"time"
)

// Limits of the idle chain goroutines the server keeps (see workers).
const (
	maxIdleWorkers  = 1024
	workerIdleLimit = time.Minute
)

// workers runs each HTTP/1.1 POST's chain (see takeovers), and what a
// handler runs aside (see aside), on a goroutine kept between requests,
// instead of a new one each time.
//
// A new goroutine starts with a small stack, and a request's chain (chi's
// routing, the handler, the request's log line) grows it several times,
// each time copying it: in a CPU profile of 100 concurrent short streams
// (BENCHMARKS.md, stop 26) runtime.copystack took 5% of the process, one
// growth after another for every request. A kept goroutine has the stack
// its last request grew, which the collector halves at most once a cycle
// while it waits.
//
// Idle goroutines wait most recently used first; at most maxIdleWorkers
// wait, and one that waited over workerIdleLimit exits when another comes
// back, or at the latest when the reaper's timer next runs (reap). The
// zero value is ready to use; stop ends the idle ones and the timer, and
// wait waits for every goroutine to return.
type workers struct {
	mu        sync.Mutex
	idle      []*worker // oldest first
	stopped   bool
	wg        sync.WaitGroup
	idleLimit time.Duration // how long one may wait; 0 is workerIdleLimit
	reaper    *time.Timer   // armed while any wait: ends those idle past the limit (reap)
}

// limit is how long an idle goroutine may wait.
func (ws *workers) limit() time.Duration {
	if ws.idleLimit > 0 {
		return ws.idleLimit
	}
	return workerIdleLimit
}

// worker is one kept goroutine: it runs the functions sent on run, until
// run is closed.
type worker struct {
	run   chan func()
	since time.Time // when it began to wait
}

// do runs f on an idle goroutine, or on a new one when none waits, and
// returns without waiting for f.
func (ws *workers) do(f func()) {
	ws.mu.Lock()
	if n := len(ws.idle); n > 0 {
		w := ws.idle[n-1]
		ws.idle[n-1] = nil
		ws.idle = ws.idle[:n-1]
		ws.mu.Unlock()
		w.run <- f
		return
	}
	ws.wg.Add(1)
	ws.mu.Unlock()
	go ws.loop(&worker{run: make(chan func(), 1)}, f)
}

// aside runs f on an idle kept goroutine (a new one when none waits), and
// waits for it; a panic in f is raised again in the caller. A handler
// runs on it what would take its own stack past 8 KiB for a stream's
// whole life (see headerFlusher): the upstream round trip and the flush
// that sends the response header, each 3 to 4 KiB deep.
//
// On a new goroutine, as each such call once ran, the runtime grew the
// small stack it starts with, copying it, at every call: runtime.newstack
// took 1.0 to 1.7% of the process under cmd/loadgen's short streams and
// one stream at a time (BENCHMARKS.md, "Issue 16, stop 39"). A kept
// goroutine has the stack its earlier work grew.
func (ws *workers) aside(f func()) {
	done := make(chan any, 1)
	ws.do(func() {
		defer func() { done <- recover() }()
		f()
	})
	if p := <-done; p != nil {
		panic(p)
	}
}

// loop runs f, then each function sent to w, until w is not kept.
func (ws *workers) loop(w *worker, f func()) {
	defer ws.wg.Done()
	for {
		f()
		if !ws.keep(w) {
			return
		}
		var ok bool
		if f, ok = <-w.run; !ok {
			return
		}
	}
}

// keep puts w back among the idle, unless the server stopped or enough
// wait; it ends the oldest idle one if that waited over workerIdleLimit.
func (ws *workers) keep(w *worker) bool {
	now := time.Now()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.stopped || len(ws.idle) >= maxIdleWorkers {
		return false
	}
	if len(ws.idle) > 0 && now.Sub(ws.idle[0].since) > ws.limit() {
		close(ws.idle[0].run)
		ws.idle[0] = nil
		ws.idle = ws.idle[1:]
	}
	w.since = now
	ws.idle = append(ws.idle, w)
	if len(ws.idle) == 1 {
		ws.armReaper(ws.limit())
	}
	return true
}

// armReaper has reap run after d, once; called with mu held.
func (ws *workers) armReaper(d time.Duration) {
	if ws.reaper == nil {
		ws.reaper = time.AfterFunc(d, ws.reap)
		return
	}
	ws.reaper.Reset(d)
}

// reap ends the goroutines idle past the limit, so that those a burst
// left end though no request comes back (keep ends one only as another
// returns), and runs again when the oldest left will be.
func (ws *workers) reap() {
	now := time.Now()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.stopped {
		return
	}
	limit := ws.limit()
	for len(ws.idle) > 0 && now.Sub(ws.idle[0].since) >= limit {
		close(ws.idle[0].run)
		ws.idle[0] = nil
		ws.idle = ws.idle[1:]
	}
	if len(ws.idle) > 0 {
		ws.armReaper(ws.idle[0].since.Add(limit).Sub(now))
	}
}

// stop ends the idle goroutines, and every busy one once its function
// returns. A function done after stop runs on a goroutine of its own.
func (ws *workers) stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.stopped = true
	if ws.reaper != nil {
		ws.reaper.Stop()
	}
	for _, w := range ws.idle {
		close(w.run)
	}
	ws.idle = nil
}

// wait waits for every goroutine to return (after stop).
func (ws *workers) wait() { ws.wg.Wait() }
