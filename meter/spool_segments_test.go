package meter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpoolRestartsDoNotPileUpSegments: OpenSpool always started a new
// segment, and only a drain, which the republisher runs only while the
// spool counts events, removes finished ones. Five restarts of a gateway
// with nothing spooled left five empty segments in spool/ and five in
// spool-dead/, one more per start for good. (Found by a crash review.)
func TestSpoolRestartsDoNotPileUpSegments(t *testing.T) {
	data := t.TempDir()
	for range 5 {
		for _, name := range []string{"spool", "spool-dead"} {
			s, err := meter.OpenSpool(filepath.Join(data, name), 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"spool", "spool-dead"} {
		if segs := segmentNames(t, filepath.Join(data, name)); len(segs) != 1 {
			t.Errorf("%s after 5 restarts with nothing spooled: segments %v, want one", name, segs)
		}
	}
	// The empty segments an earlier release left go at the next start.
	dir := t.TempDir()
	for n := 1; n <= 5; n++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.seg", n)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if segs := segmentNames(t, dir); len(segs) != 1 {
		t.Errorf("after a start on 5 empty segments: segments %v, want one", segs)
	}
}

// TestSpoolRestartRemovesASentSegment: a segment the republisher had sent
// whole stayed on disk (it was still the one written to), and after a
// restart no drain ran to remove it, the spool counting no event: 610 KB
// of sent events kept for good. It is removed at the start, in the usage
// spool and the dead-letter spool alike, and what is appended after the
// restart is sent, once.
func TestSpoolRestartRemovesASentSegment(t *testing.T) {
	for _, name := range []string{"spool", "spool-dead"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			s, err := meter.OpenSpool(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if err := s.Append(testEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			if sent, err := s.Drain(context.Background(), failAfter(-1)); sent != 100 || err != nil {
				t.Fatalf("Drain = %d, %v", sent, err)
			}
			sent := segmentNames(t, dir)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := meter.OpenSpool(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if segs := segmentNames(t, dir); len(segs) != 1 || segs[0] == sent[0] {
				t.Errorf("after the restart: segments %v; want one, not the sent %v", segs, sent)
			}
			if err := s2.Append(testEvent(100)); err != nil {
				t.Fatal(err)
			}
			if got := drainAll(t, s2); fmt.Sprint(got) != "[100]" {
				t.Errorf("drained %v after the restart, want [100]", got)
			}
		})
	}
}

// TestSpoolRestartKeepsWhatIsUnsent: removing sent segments at the start
// must never take an unsent record: a segment sent in part keeps its
// rest, a torn record at a segment's end (an append that never returned)
// does not make it look sent, and new records never go after a torn one.
func TestSpoolRestartKeepsWhatIsUnsent(t *testing.T) {
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
	s.Close()
	// A second process: events 3 and 4 in a second segment, 0 to 3 sent,
	// then killed mid-append (a torn record after event 4).
	s, err = meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 5; i++ {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if sent, _ := s.Drain(context.Background(), failAfter(4)); sent != 4 {
		t.Fatalf("Drain sent %d, want 4", sent)
	}
	s.Close()
	segs := segmentNames(t, dir)
	tear(t, filepath.Join(dir, segs[len(segs)-1]))

	for restart := range 3 {
		s, err = meter.OpenSpool(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n, _, _ := s.Stats(); n != 1 {
			t.Errorf("restart %d: %d events waiting, want 1 (event 4)", restart, n)
		}
		s.Close()
	}
	logs := captureLogs(t)
	s, err = meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(testEvent(5)); err != nil {
		t.Fatal(err)
	}
	if got := drainAll(t, s); fmt.Sprint(got) != "[4 5]" {
		t.Errorf("drained %v, want [4 5]", got)
	}
	if l := logs.String(); strings.Contains(l, "corrupt") {
		t.Errorf("event 5 went after the torn record, which was then read as a corrupt one: %s", l)
	}
	if segs := segmentNames(t, dir); len(segs) != 1 {
		t.Errorf("drained spool: segments %v, want one", segs)
	}
}

// TestSpoolRestartAfterASentSegmentWithATornTail: the records of a
// segment all sent, and a torn record after them (its append never
// returned): the segment holds nothing to send and goes at the start, and
// what is appended next is sent.
func TestSpoolRestartAfterASentSegmentWithATornTail(t *testing.T) {
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
	drainAll(t, s)
	s.Close()
	torn := segmentNames(t, dir)
	tear(t, filepath.Join(dir, torn[0]))
	s, err = meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, _, _ := s.Stats(); n != 0 {
		t.Errorf("after the restart: %d events waiting, want none", n)
	}
	if segs := segmentNames(t, dir); len(segs) != 1 || segs[0] == torn[0] {
		t.Errorf("after the restart: segments %v; want one, not the sent %v", segs, torn)
	}
	if err := s.Append(testEvent(3)); err != nil {
		t.Fatal(err)
	}
	if got := drainAll(t, s); fmt.Sprint(got) != "[3]" {
		t.Errorf("drained %v, want [3]", got)
	}
}

// segmentNames lists the segment files of the spool in dir, ascending.
func segmentNames(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range segs {
		segs[i] = filepath.Base(segs[i])
	}
	return segs
}

// tear appends a torn record to the segment at path, as a kill -9
// mid-write leaves it: a header and part of its data.
func tear(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := make([]byte, 8+100)
	torn[2] = 0x10 // length 4096, crc 0: 100 bytes of it written
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// drainAll drains s, returning the events' PromptTokens in order.
func drainAll(t *testing.T, s *meter.Spool) []int64 {
	t.Helper()
	var got []int64
	if _, err := s.Drain(context.Background(), func(_ context.Context, data []byte) error {
		e, _ := usage.Decode(data)
		got = append(got, e.Usage.PromptTokens)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}
