package gateway_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/journal"
)

// killSnapshot copies the crash journal in dir as a kill -9 would leave
// it (the segments' bytes written so far) and returns the requests its
// recovery finds in flight.
func killSnapshot(t *testing.T, dir string) []journal.Request {
	t.Helper()
	snap := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snap, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, reqs, err := journal.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}
