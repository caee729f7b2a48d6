package meter_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolSegmentThatCannotBeReadSaysWhatToDo: a spool segment the
// gateway cannot read (its owner or mode changed by a restore; here a
// link to itself, which root cannot open either) stopped the start with
// `spool: open …: permission denied` and nothing more, where the cursor
// that cannot be read says what to do: the segment holds usage events
// acknowledged to clients and not yet sent, and must not simply be
// deleted. (A crash review.)
func TestSpoolSegmentThatCannotBeReadSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "00000000000000000001.seg")
	if err := os.Symlink(filepath.Base(seg), seg); err != nil {
		t.Fatal(err)
	}
	s, err := meter.OpenSpool(dir, 0)
	if err == nil {
		s.Close()
		t.Fatal("OpenSpool with a segment that cannot be read succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, seg) || !strings.Contains(msg, "readable") || !strings.Contains(msg, "not delete") {
		t.Errorf("OpenSpool = %q: want the segment's path and what to do (make it readable; do not delete it)", msg)
	}
}
