package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJournalSegmentThatCannotBeReadSaysWhatToDo: a segment the gateway
// cannot read (its owner or mode changed by a restore; here a link to
// itself, which root cannot open either) stopped the start with
// `journal: open …: permission denied` and nothing more: not what to do,
// nor that the file must not simply be deleted, since it holds the
// requests in flight at the last stop, which are billed from it. (A crash
// review.)
func TestJournalSegmentThatCannotBeReadSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	seg := segPath(dir, 1, 0xabcd)
	if err := os.Symlink(filepath.Base(seg), seg); err != nil {
		t.Fatal(err)
	}
	j, _, err := Open(dir)
	if err == nil {
		j.Close()
		t.Fatal("Open with a segment that cannot be read succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, seg) || !strings.Contains(msg, "readable") || !strings.Contains(msg, "not delete") {
		t.Errorf("Open = %q: want the segment's path and what to do (make it readable; do not delete it)", msg)
	}
}
