package meter_test

import (
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolCloseWaitsWhenCalledTwice: a Close that finds another Close
// under way returns only once the spool is closed, as the first does. The
// second returned at once (a lifecycle review): a process stopping its
// components from two paths could open the spool again, or exit, while
// the first still held its lock and segment.
func TestSpoolCloseWaitsWhenCalledTwice(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		s, err := meter.OpenSpool(dir, 0)
		if err != nil {
			t.Fatalf("round %d: open after both Closes returned: %v", i, err)
		}
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		returned := make(chan error, 2)
		for range 2 {
			wg.Go(func() { <-start; returned <- s.Close() })
		}
		close(start)
		if err := <-returned; err != nil {
			t.Fatalf("round %d: Close: %v", i, err)
		}
		// Whichever Close returned first, the spool is closed: it opens.
		again, err := meter.OpenSpool(dir, 0)
		if err != nil {
			t.Fatalf("round %d: a Close returned with the spool still open: %v", i, err)
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
