package meter_test

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestSpoolWriteErrorClearsOnceTheDiskIsFreed (a crash review): the
// spool's write error ("no space left on device"), which /readyz shows as
// the spool's write_error, cleared only when the spool next wrote, and it
// writes only while NATS is unreachable: with NATS back and the disk
// freed, /readyz went on saying the spool could not write, for good. It
// must say what is true now: still failing while the disk stays full,
// nothing within a few seconds of the disk being freed, with no append
// in between.
func TestSpoolWriteErrorClearsOnceTheDiskIsFreed(t *testing.T) {
	s, filler, big := appendOnAFullDisk(t)
	// Still full, a while later: still failing.
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := s.WriteError(); err == nil || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("the disk still full, the write error = %v, want the disk's", err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.WriteError() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the disk was freed, with no append since, the write error = %v, want none", s.WriteError())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And the spool does write.
	if err := s.Append(big); err != nil {
		t.Fatalf("append once the write error cleared: %v", err)
	}
}
