package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
)

// lockDataDir takes an exclusive lock (flock) on dir's LOCK file, making
// dir when missing, held until release is called or the process ends. Two
// processes on one data directory would each take the other's crash
// journal for a crashed process's (recovering its requests in flight as
// crashed, and deleting the segment it writes) and drain each other's
// spool segments away: a second process is refused at start instead. It
// returns an error naming the holder's pid when dir is in use. purpose
// says what this process holds it for ("tollgate gateway", or
// handOverPurpose's words).
func lockDataDir(dir, purpose string) (release func() error, err error) {
	l, err := dirlock.AcquireFor(dir, purpose)
	var busy *dirlock.BusyError
	switch {
	case errors.As(err, &busy) && strings.Contains(busy.Purpose, handOverWords):
		// Held for the moment of a hand-over (seconds; retried while it
		// fails): the directory is not another gateway's.
		return nil, &heldError{busy, fmt.Sprintf("data directory %s is held by another tollgate process (pid %s%s) while it moves the "+
			"store there; start this process again once it is done (that process logs when), or give each process a "+
			"data directory of its own (TOLLGATE_DATA_DIR)", dir, busy.Holder, busy.For())}
	case errors.As(err, &busy):
		return nil, &heldError{busy, fmt.Sprintf("data directory %s is in use by another tollgate process (pid %s%s): each gateway needs a "+
			"data directory of its own (TOLLGATE_DATA_DIR)", dir, busy.Holder, busy.For())}
	case errors.Is(err, syscall.ENOTDIR):
		// "mkdir …: not a directory" alone named neither the setting nor
		// the file in the way (a crash review).
		return nil, fmt.Errorf("TOLLGATE_DATA_DIR=%s: %s is a file, not a directory: set TOLLGATE_DATA_DIR to a directory, "+
			"or to a path where one can be made (default ./tollgate-data), for the crash journal and the usage spools (%w)",
			dir, fileInTheWay(dir), err)
	case err != nil:
		return nil, fmt.Errorf("data directory %s (TOLLGATE_DATA_DIR): %w", dir, err)
	}
	return l.Release, nil
}

// heldError is lockDataDir's error when another process holds the
// directory: what to do about it, and the holder (errors.As finds the
// *dirlock.BusyError).
type heldError struct {
	busy *dirlock.BusyError
	msg  string
}

func (e *heldError) Error() string { return e.msg }
func (e *heldError) Unwrap() error { return e.busy }

// fileInTheWay is the first of dir and its parents, from the root down,
// that exists and is not a directory (dir itself when none is found).
func fileInTheWay(dir string) string {
	var paths []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		paths = append(paths, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for _, p := range slices.Backward(paths) {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return dir
}

// logDataDir logs where the data directory is, as an absolute path: the
// crash journal and the spools (and serve's embedded JetStream store) are
// read back from there at the next start. A relative TOLLGATE_DATA_DIR
// (the default, ./tollgate-data) is resolved against the working
// directory, so a start from another one does not see what an earlier run
// left (requests in flight at a crash, events spooled while NATS was out
// of reach): that is a warning, naming both paths.
func logDataDir(log *slog.Logger, dir string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if filepath.IsAbs(dir) {
		log.Info("data directory", "path", abs)
		return
	}
	log.Warn("TOLLGATE_DATA_DIR is relative: a start from another working directory uses another data directory, "+
		"and does not send what a crash or an outage left in this one; set an absolute path",
		"data_dir", dir, "path", abs)
}

// handOverPurpose is what a process running role ("meter", "admin") holds
// a data directory for while it hands the embedded JetStream store over.
func handOverPurpose(role string) string {
	return "tollgate " + role + ": " + handOverWords + " to TOLLGATE_NATS_URL"
}

// handOverWords mark a data directory's lock held for a hand-over.
const handOverWords = "moving the embedded JetStream store"
