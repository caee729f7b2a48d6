package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHandOverLockFailureIsTriedAgain: a `tollgate meter` that cannot take
// the data directory's lock for a reason other than another process
// holding it (here LOCK is a directory: the open fails) left the embedded
// store alone as if another process were handing it over, and said
// nothing more: with no such process, the events it held were stranded
// until a restart after the fix. Now the attempt fails, /readyz says so
// and why, and it is tried again: once the operator fixes the directory,
// the store is handed over without a restart and its events reach the
// ledger.
func TestHandOverLockFailureIsTriedAgain(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	s := newStack(t, nil)
	ids := s.strandedStore(10, "poison-lock")
	lock := filepath.Join(s.env.DataDir, "LOCK")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(lock, 0o700); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	natsOn(t, t.TempDir(), addr)
	e := s.env
	e.NATSURL, e.AdminListen = "nats://"+addr, "127.0.0.1:0"
	e.handOverRetry = [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}
	a, err := start(context.Background(), s.log, e, s.cfg, roles{meter: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	s.store = a.store
	waitHandOverState(t, a, roles{meter: true}, "failed", "LOCK")
	if _, err := os.Stat(filepath.Join(e.DataDir, "jetstream")); err != nil {
		t.Fatalf("the store moved without the data directory's lock: %v", err)
	}

	if err := os.Remove(lock); err != nil { // the operator's fix
		t.Fatal(err)
	}
	waitHandedOver(t, e.DataDir, 20*time.Second)
	s.waitEvents(10, 30*time.Second)
	for _, id := range ids {
		s.event(id)
	}
}
