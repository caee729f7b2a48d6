// Package dirlock provides an exclusive lock on a directory, held by one
// process at a time: for the directories a process must own alone (a
// data directory, a crash journal, a spool), whose files another process
// would take for a crashed one's and delete or send on under it.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Lock is a held lock on a directory: an exclusive lock (flock on Unix,
// LockFileEx on Windows) on its LOCK file, which holds the pid of the
// process that took it.
type Lock struct{ f *os.File }

// BusyError is Acquire's error when another process holds the lock.
type BusyError struct {
	Dir    string
	Holder string // the holder's pid, as it wrote it ("" when unknown)
	// Purpose is what the holder said it holds the directory for
	// (AcquireFor; "" when it did not say).
	Purpose string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is in use by another process (pid %s%s): each process needs a directory of its own "+
		"(for tollgate, its own TOLLGATE_DATA_DIR, not linked or mounted to another's)", e.Dir, orUnknown(e.Holder), e.For())
}

// For is ", " and Purpose, or "" when the holder did not say.
func (e *BusyError) For() string {
	if e.Purpose == "" {
		return ""
	}
	return ", " + e.Purpose
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Acquire takes the lock on dir (made when missing, mode 0700) without
// waiting, and writes this process's pid into its LOCK file. The lock is
// the open file's: it is held until Release, or until the process ends
// (a crash releases it). A second Acquire of dir, by another process or by
// this one, fails with *BusyError while it is held, however dir is
// reached (a symbolic link, a bind mount: the lock is the file's). Other
// errors are the file system's.
func Acquire(dir string) (*Lock, error) { return AcquireFor(dir, "") }

// AcquireFor is Acquire, writing purpose (one line: what the directory is
// held for) after the pid, for a BusyError to name.
func AcquireFor(dir, purpose string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if busy, err := tryLock(f); err != nil || busy {
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		holder, _ := os.ReadFile(path)
		pid, what, _ := strings.Cut(strings.TrimSpace(string(holder)), "\n")
		return nil, &BusyError{Dir: dir, Holder: strings.TrimSpace(pid), Purpose: strings.TrimSpace(what)}
	}
	_ = f.Truncate(0)
	what := strconv.Itoa(os.Getpid()) + "\n"
	if purpose = strings.Join(strings.Fields(purpose), " "); purpose != "" {
		what += purpose + "\n"
	}
	_, _ = f.WriteAt([]byte(what), 0)
	return &Lock{f: f}, nil
}

// Release releases the lock; a second call does nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}
