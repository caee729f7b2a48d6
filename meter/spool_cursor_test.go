package meter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpoolBrokenCursorResendsEverything: a cursor file that does not
// parse (a torn write, an empty file, garbage, a negative offset) stopped
// the gateway from starting: `tollgate serve: spool cursor …/cursor:
// unexpected end of JSON input`, exit 1, and nothing said what to do.
// Starting from the oldest segment on disk loses nothing (what is sent
// again has the same ids, which JetStream and the ledger drop), so the
// spool does that, with a warning naming the file, and keeps the broken
// file aside for inspection. (Found by a crash review.)
func TestSpoolBrokenCursorResendsEverything(t *testing.T) {
	for name, cursor := range map[string]string{
		"torn":            `{"segm`,
		"empty":           ``,
		"garbage":         "\x00\x00\x00\x00",
		"not an object":   `[1,2]`,
		"negative offset": `{"segment":1,"offset":-40}`,
	} {
		t.Run(name, func(t *testing.T) {
			logs := captureLogs(t)
			dir := t.TempDir()
			s, err := meter.OpenSpool(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if err := s.Append(testEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			// Two sent on, then NATS goes away: the cursor is mid-segment.
			if sent, _ := s.Drain(context.Background(), failAfter(2)); sent != 2 {
				t.Fatalf("Drain sent %d, want 2", sent)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "cursor")
			if err := os.WriteFile(path, []byte(cursor), 0o600); err != nil {
				t.Fatal(err)
			}

			s2, err := meter.OpenSpool(dir, 0)
			if err != nil {
				t.Fatalf("OpenSpool with the cursor %q: %v", cursor, err)
			}
			defer s2.Close()
			if n, _, _ := s2.Stats(); n != 5 {
				t.Errorf("after the restart: %d events waiting, want all 5 (the cursor is lost: everything on disk is sent again)", n)
			}
			var got []int64
			if _, err := s2.Drain(context.Background(), func(_ context.Context, data []byte) error {
				e, _ := usage.Decode(data)
				got = append(got, e.Usage.PromptTokens)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != "[0 1 2 3 4]" {
				t.Errorf("drained %v, want [0 1 2 3 4]", got)
			}
			if n, b, _ := s2.Stats(); n != 0 || b != 0 {
				t.Errorf("drained spool: %d events, %d bytes; want none", n, b)
			}
			broken, _ := filepath.Glob(filepath.Join(dir, "cursor.broken-*"))
			if len(broken) != 1 {
				t.Fatalf("broken cursors kept: %v, want one", broken)
			}
			if b, _ := os.ReadFile(broken[0]); string(b) != cursor {
				t.Errorf("%s holds %q, want the broken cursor %q", broken[0], b, cursor)
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, path) || !strings.Contains(l, filepath.Base(broken[0])) {
				t.Errorf("no warning naming %s and where it went: %s", path, l)
			}
		})
	}
}

// TestSpoolCursorBrokenWhileRunning: Drain read the cursor file again on
// every round, so a cursor damaged while the gateway ran (by hand, a
// restore) paused republishing for good, every round failing on it. The
// cursor is read once, at open; a drain goes on from where the last one
// saved it, and its next save replaces the damaged file.
func TestSpoolCursorBrokenWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if sent, _ := s.Drain(context.Background(), failAfter(2)); sent != 2 {
		t.Fatalf("Drain sent %d, want 2", sent)
	}
	if err := os.WriteFile(filepath.Join(dir, "cursor"), []byte(`{"segm`), 0o600); err != nil {
		t.Fatal(err)
	}
	if sent, err := s.Drain(context.Background(), failAfter(-1)); sent != 3 || err != nil {
		t.Fatalf("Drain after the cursor file was damaged = %d, %v; want the 3 left", sent, err)
	}
	if n, b, _ := s.Stats(); n != 0 || b != 0 {
		t.Errorf("drained spool: %d events, %d bytes; want none", n, b)
	}
}

// TestSpoolCursorThatCannotBeReadSaysWhatToDo: a cursor that cannot be
// read at all (here a directory; a permission or an I/O error does the
// same) is not a torn write, and the spool's start-up still fails, but
// with an error that names the file and what to do about it.
func TestSpoolCursorThatCannotBeReadSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := meter.OpenSpool(dir, 0)
	if err == nil {
		t.Fatal("OpenSpool with an unreadable cursor succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "remove") {
		t.Errorf("OpenSpool = %q: want the cursor's path and what to do (remove it)", msg)
	}
}

// failAfter returns a send that takes n records, then fails.
func failAfter(n int) func(context.Context, []byte) error {
	return func(context.Context, []byte) error {
		if n == 0 {
			return errors.New("nats down")
		}
		n--
		return nil
	}
}

// captureLogs sends the default logger's lines to a buffer until the test
// ends.
func captureLogs(t *testing.T) *metertest.LockedBuffer {
	t.Helper()
	var logs metertest.LockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &logs
}

// TestSpoolCursorAtOddsWithTheDiskResendsEverything: a cursor that parses
// but does not fit the segments on disk (a flipped digit, a restore that
// brought back a cursor newer than the segments) was believed: past its
// segment's end, the segment was taken as sent and deleted at the next
// start, and with a segment number past the segments holding events, those
// were deleted as sent, in both cases without a word (a crash review: 27
// events a gateway had spooled, each acknowledged to its client, gone from
// the spool and never in the ledger). Inside a record, the bytes from
// there to the next record went to the dead-letter stream as a corrupt
// record. Such a cursor is set aside as one that does not parse is, and
// everything on disk is sent again.
func TestSpoolCursorAtOddsWithTheDiskResendsEverything(t *testing.T) {
	for name, cursor := range map[string]func(saved string, off int64) string{
		"offset past its segment's end": func(string, int64) string { return `{"segment":1,"offset":99999}` },
		"offset inside a record":        func(_ string, off int64) string { return fmt.Sprintf(`{"segment":1,"offset":%d}`, off+5) },
		"segment past the segments":     func(string, int64) string { return `{"segment":7,"offset":0}` },
	} {
		t.Run(name, func(t *testing.T) {
			logs := captureLogs(t)
			dir := t.TempDir()
			s, err := meter.OpenSpool(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if err := s.Append(testEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			if sent, _ := s.Drain(context.Background(), failAfter(2)); sent != 2 {
				t.Fatalf("Drain sent %d, want 2", sent)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "cursor")
			saved, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var off int64
			if _, err := fmt.Sscanf(string(saved), `{"segment":1,"offset":%d}`, &off); err != nil {
				t.Fatalf("the cursor saved, %s: %v", saved, err)
			}
			damaged := cursor(string(saved), off)
			if err := os.WriteFile(path, []byte(damaged), 0o600); err != nil {
				t.Fatal(err)
			}

			s2, err := meter.OpenSpool(dir, 0)
			if err != nil {
				t.Fatalf("OpenSpool with the cursor %s: %v", damaged, err)
			}
			defer s2.Close()
			if n, _, _ := s2.Stats(); n != 5 {
				t.Errorf("after the restart: %d events waiting, want all 5 (the cursor does not fit the disk: everything on it is sent again)", n)
			}
			var got []int64
			if _, err := s2.DrainSkipping(context.Background(), func(_ context.Context, data []byte) error {
				e, _ := usage.Decode(data)
				got = append(got, e.Usage.PromptTokens)
				return nil
			}, func(_ context.Context, raw []byte, where string) error {
				t.Errorf("bytes set aside as a corrupt record (%s): %q", where, raw)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != "[0 1 2 3 4]" {
				t.Errorf("drained %v, want [0 1 2 3 4]", got)
			}
			broken, _ := filepath.Glob(filepath.Join(dir, "cursor.broken-*"))
			if len(broken) != 1 {
				t.Fatalf("broken cursors kept: %v, want one", broken)
			}
			if b, _ := os.ReadFile(broken[0]); string(b) != damaged {
				t.Errorf("%s holds %q, want the cursor %q", broken[0], b, damaged)
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, path) {
				t.Errorf("no warning naming %s: %s", path, l)
			}
		})
	}
}
