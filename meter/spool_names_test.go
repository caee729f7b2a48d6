package meter_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolFileNamedLikeASegment: segments were listed by reading a
// number from the front of any name ending .seg, so a copy beside a
// segment ("00000000000000000001 (copy).seg") was the same segment again:
// its events counted twice, the spool never empty after its drain (the
// gateway's estimates of crashed requests spooled behind nothing, and the
// spool's age alert firing), and once the drain had removed the real
// segment the next start failed on it, `open …/00000000000000000001.seg:
// no such file or directory`, a file no one had named. A file that is
// not named as a segment is left alone now, with a warning naming it.
func TestSpoolFileNamedLikeASegment(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "00000000000000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	strays := []string{filepath.Join(dir, "00000000000000000001 (copy).seg"), filepath.Join(dir, "7.seg")}
	for _, p := range strays {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		s, err := meter.OpenSpool(dir, 0)
		if err != nil {
			t.Fatalf("start %d: %v", round+1, err)
		}
		sent, err := s.Drain(context.Background(), failAfter(-1))
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{3, 0}[round]; sent != want {
			t.Errorf("start %d: sent %d, want %d", round+1, sent, want)
		}
		if n, _, _ := s.Stats(); n != 0 {
			t.Errorf("start %d: %d events waiting after the drain, want none", round+1, n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range strays {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v; want it left alone", p, err)
		}
		if !strings.Contains(logs.String(), filepath.Base(p)) {
			t.Errorf("no warning naming %s:\n%s", p, logs.String())
		}
	}
}
