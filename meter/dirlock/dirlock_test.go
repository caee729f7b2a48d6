package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// TestAcquireForNamesItsPurpose: a lock taken for a purpose names it to a
// second holder, on one line whatever its spaces, beside the pid; one
// taken without names none, and a lock taken again after it says the new
// holder's purpose, not the old one's.
func TestAcquireForNamesItsPurpose(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.AcquireFor(dir, "tollgate meter:\n  moving  the store")
	if err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.Acquire(dir)
	var busy *dirlock.BusyError
	if !errors.As(err, &busy) || busy.Holder != strconv.Itoa(os.Getpid()) || busy.Purpose != "tollgate meter: moving the store" ||
		!strings.Contains(err.Error(), ", tollgate meter: moving the store)") {
		t.Fatalf("a second Acquire = %v (%+v), want the pid and the purpose on one line", err, busy)
	}
	_ = l.Release()
	l, err = dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err = dirlock.AcquireFor(dir, "other"); !errors.As(err, &busy) || busy.Purpose != "" || busy.For() != "" {
		t.Fatalf("held without a purpose: %v (%+v), want none named", err, busy)
	}
}
