package meter

import (
	"os"
	"path/filepath"
	"time"
)

// probeEvery is how often WriteError tries the disk while the spool's
// writes fail, and probeBytes how much it writes: a few events' worth.
const (
	probeEvery = time.Second
	probeBytes = 16 << 10
)

// probeName is the probe file WriteError writes in the spool's directory
// (never a segment's name: a crash leaves it unread, and the next probe
// replaces it).
const probeName = "write-probe.tmp"

// probeDir writes probeBytes to a probe file in dir, fsyncs it and
// removes it; it returns the first error.
func probeDir(dir string) error {
	path := filepath.Join(dir, probeName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	if _, err := f.Write(make([]byte, probeBytes)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
