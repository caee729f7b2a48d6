package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestARelativeDataDirIsAWarning (a crash review): the data directory
// defaults to ./tollgate-data, resolved against the working directory; a
// gateway started from another one began with an empty crash journal and
// spool, and what a crash or an outage had left in the first (requests in
// flight, events not yet sent) was never sent, with no word of it. The
// start names the directory's absolute path, with a warning when it was
// given relative.
func TestARelativeDataDirIsAWarning(t *testing.T) {
	for _, c := range []struct {
		dir  string
		warn bool
	}{{"./tollgate-data", true}, {t.TempDir(), false}} {
		var buf bytes.Buffer
		logDataDir(slog.New(slog.NewTextHandler(&buf, nil)), c.dir)
		abs, _ := filepath.Abs(c.dir)
		out := buf.String()
		if strings.Contains(out, "level=WARN") != c.warn || !strings.Contains(out, abs) {
			t.Errorf("%s: logged %q; want its absolute path %s, a warning %v", c.dir, out, abs, c.warn)
		}
	}
}
