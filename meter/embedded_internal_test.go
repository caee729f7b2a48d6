package meter

import "testing"

// TestStoreFailedKeepsTheNewerServers: heal's channel holds one failure; a
// failure logged late by a server already replaced must not push out the
// newer server's, which its store logs only once.
func TestStoreFailedKeepsTheNewerServers(t *testing.T) {
	e := &Embedded{failed: make(chan storeFailure, 1)}
	for _, order := range [][]uint64{{1, 0}, {0, 1}, {1, 1}} {
		e.storeFailed(order[0], "first")
		e.storeFailed(order[1], "second")
		got := <-e.failed
		if got.gen != max(order[0], order[1]) {
			t.Errorf("failures of servers %v: heal got server %d's", order, got.gen)
		}
		select {
		case f := <-e.failed:
			t.Errorf("failures of servers %v: a second one waits: %+v", order, f)
		default:
		}
	}
}
