package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestADataDirectoryThatIsAFileNamesTheSetting: TOLLGATE_DATA_DIR naming a
// file (a typo, or a volume mounted over a file), or a path under one,
// refused the start with "data directory: mkdir …: not a directory", which
// named neither the setting nor what it should be. The refusal now names
// TOLLGATE_DATA_DIR, the path, and that it must be a directory (or a path
// one can be made at).
func TestADataDirectoryThatIsAFileNamesTheSetting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tollgate-data")
	if err := os.WriteFile(file, []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "gateway")} {
		err := startGatewayOn(t, dir)
		if err == nil {
			t.Fatalf("a gateway started with TOLLGATE_DATA_DIR=%s, under a file", dir)
		}
		for _, want := range []string{"TOLLGATE_DATA_DIR", dir, file + " is a file", "directory"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("TOLLGATE_DATA_DIR=%s: %v; want it to say %q", dir, err, want)
			}
		}
	}
}
