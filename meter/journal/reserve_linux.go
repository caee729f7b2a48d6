package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// reserve allocates the disk blocks of f's first n bytes without changing
// its size (fallocate, FALLOC_FL_KEEP_SIZE), so that appends up to n bytes
// do not fail when the file system fills up. Best effort: a file system
// without fallocate, or one too full for n bytes, reserves nothing, and
// the journal writes as it did.
func reserve(f *os.File, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, 0, n) })
}
