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
