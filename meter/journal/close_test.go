package journal

import (
	"sync"
	"testing"
)

// TestCloseWaitsWhenCalledTwice: a Close that finds another Close under
// way returns only once the journal is closed, its last records written
// and its directory released, as the first does. The second returned once
// the writer goroutine had stopped (a lifecycle review), before the final
// write, fsync and release: a process stopping its components from two
// paths could exit with the last records unwritten.
func TestCloseWaitsWhenCalledTwice(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		j, _, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: open after both Closes returned: %v", i, err)
		}
		j.Begin(testEvent(i), nil)
		var wg sync.WaitGroup
		start := make(chan struct{})
		returned := make(chan error, 2)
		for range 2 {
			wg.Go(func() { <-start; returned <- j.Close() })
		}
		close(start)
		if err := <-returned; err != nil {
			t.Fatalf("round %d: Close: %v", i, err)
		}
		// Whichever Close returned first, the journal is closed: it opens,
		// with the request begun.
		again, reqs, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: a Close returned with the journal still open: %v", i, err)
		}
		if len(reqs) != 1 || reqs[0].Event.ID != testEvent(i).ID {
			t.Fatalf("round %d: the journal reopened holds %d requests, want the one begun", i, len(reqs))
		}
		if err := again.Release(); err != nil {
			t.Fatal(err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := <-returned; err != nil {
			t.Fatalf("round %d: Close: %v", i, err)
		}
	}
}
