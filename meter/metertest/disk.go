package metertest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes on a temporary directory (a real
// file system that runs out of space), unmounted when the test ends. A
// test that cannot mount one (it needs CAP_SYS_ADMIN, as root in CI has)
// fails under CI=true and is skipped, saying so, elsewhere.
func SmallDisk(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("metertest: cannot mount a tmpfs to fill (needs CAP_SYS_ADMIN): %v", err)
		}
		t.Skipf("metertest: cannot mount a tmpfs to fill (needs CAP_SYS_ADMIN; run as root, or under CI=true to fail): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// FillDisk writes a filler file in dir until its file system is full
// (ENOSPC), and returns its path: removing it frees the disk again.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 512)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("metertest: filling the disk: %v", err)
			}
			return path
		}
	}
}
