package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
)

// TestAcquire: a directory's lock is held by one holder at a time, reached
// directly or through a symbolic link, names the holder's pid, and is
// taken again once released.
func TestAcquire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, link} {
		_, err := dirlock.Acquire(d)
		var busy *dirlock.BusyError
		if !errors.As(err, &busy) || busy.Holder != strconv.Itoa(os.Getpid()) {
			t.Fatalf("a second Acquire of %s = %v, want BusyError naming pid %d", d, err, os.Getpid())
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("a second Release = %v", err)
	}
	again, err := dirlock.Acquire(link)
	if err != nil {
		t.Fatalf("Acquire once released = %v", err)
	}
	_ = again.Release()
}
