package dirlock

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// TestSyncDir: a directory syncs; a missing one is the open's error, not
// a silent success (a segment's rename would then be taken for durable).
func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%s) = %v", dir, err)
	}
	if err := SyncDir(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory = %v, want ErrNotExist", err)
	}
}
