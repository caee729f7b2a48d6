package journal

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestJournalInUseIsRefused: a journal directory reached by a second
// gateway (a journal linked or mounted from another data directory, which
// the data directory's own lock does not cover) was opened: the second took
// the first's requests in flight for a crashed process's (billed as
// estimates ahead of their exact events), and its Release deleted the
// segment the first still wrote, so a crash of the first lost its requests
// in flight (a crash review). The second Open is refused, naming the
// holder; once the first closes, the journal opens.
func TestJournalInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	live := testEvent(1)
	first.Begin(live, []byte(`{"model":"sim-pro"}`))
	first.written(t)

	link := filepath.Join(t.TempDir(), "journal")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, link} {
		second, reqs, err := Open(d)
		if err == nil {
			second.Close()
			t.Fatalf("a second Open of %s, in use, succeeded (recovering %d live requests as crashed)", d, len(reqs))
		}
		if !strings.Contains(err.Error(), "in use by another process (pid "+strconv.Itoa(os.Getpid())+")") {
			t.Fatalf("a second Open of %s = %v, want it refused naming the holder", d, err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, reqs, err := Open(link)
	if err != nil {
		t.Fatalf("Open once the first closed = %v", err)
	}
	defer again.Close()
	if len(reqs) != 1 || reqs[0].Event.ID != live.ID {
		t.Fatalf("once the first closed, Open recovered %d requests, want its one in flight", len(reqs))
	}
}
