package meter_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
)

// spoolSegment spools n events in a new spool, closes it, and returns its
// directory, its one segment's path and bytes, and where its last record
// begins.
func spoolSegment(t *testing.T, n int) (dir, path string, b []byte, last int) {
	t.Helper()
	dir = t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	if b, err = os.ReadFile(segs[0]); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 8 + int(binary.BigEndian.Uint32(b[off:])) {
		last = off
	}
	return dir, segs[0], b, last
}

// drainAside drains the spool in dir, opened anew, and returns how many
// events it sent and the bytes it set aside (as the republisher does, for
// the dead-letter stream), with where they were.
func drainAside(t *testing.T, dir string, fail error) (sent int, aside [][]byte, where []string, s *meter.Spool) {
	t.Helper()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, err = s.DrainSkipping(context.Background(), func(context.Context, []byte) error { sent++; return nil },
		func(_ context.Context, raw []byte, w string) error {
			if fail != nil {
				return fail
			}
			aside = append(aside, bytes.Clone(raw))
			where = append(where, w)
			return nil
		})
	if err != nil && !errors.Is(err, fail) {
		t.Fatal(err)
	}
	return sent, aside, where, s
}

// TestSpoolDamagedLastRecordIsSetAside: a record damaged on disk between
// intact ones goes to the dead-letter stream with its bytes, but one at a
// segment's end was only logged, and deleted with its segment (or, a
// segment's only record, deleted at open unread): an acknowledged event
// lost. Its bytes are set aside as the others' are now, with where they
// were, before the segment is deleted, and a spool holding nothing else
// counts their bytes as waiting, so that the republisher drains it.
func TestSpoolDamagedLastRecordIsSetAside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		damage func(b []byte, last int)
	}{
		{"its crc", 3, func(b []byte, last int) { b[len(b)-2] ^= 0x01 }},
		{"its length", 3, func(b []byte, last int) { binary.BigEndian.PutUint32(b[last:], 0xffffffff) }},
		{"a segment's only record", 1, func(b []byte, last int) { b[len(b)-2] ^= 0x01 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path, b, last := spoolSegment(t, tc.events)
			tc.damage(b, last)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			// The dead-letter stream refuses at first: the bytes stay.
			sent1, aside, _, s := drainAside(t, dir, errors.New("no stream"))
			if len(aside) != 0 {
				t.Fatal("set aside though refused")
			}
			if n, size, _ := s.Stats(); n == 0 && size == 0 {
				t.Error("the spool counts nothing waiting: the republisher would never drain the damaged record")
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the segment went before its damaged record was set aside: %v", err)
			}
			s.Close()
			sent, aside, where, s := drainAside(t, dir, nil)
			if sent1+sent != tc.events-1 || len(aside) != 1 || !bytes.Equal(aside[0], b[last:]) {
				t.Fatalf("sent %d events, set aside %d spans (%q), want %d and the damaged record's bytes", sent1+sent, len(aside), aside, tc.events-1)
			}
			if !strings.Contains(where[0], filepath.Base(path)) {
				t.Errorf("where = %q, want the segment named", where[0])
			}
			if n, size, _ := s.Stats(); n != 0 || size != 0 {
				t.Errorf("after the drain Stats = %d events, %d bytes; want none", n, size)
			}
		})
	}
}

// TestSpoolTornLastRecordIsNotSetAside: the end of a segment that is the
// start of a record no Append returned for (cut short by a kill -9, or
// followed by zeros a power loss left before its fsync) or only zeros is
// not data: its event's request is still open in the crash journal,
// which bills it. It is not set aside for the dead-letter stream.
func TestSpoolTornLastRecordIsNotSetAside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, last int) []byte
		sent   int
	}{
		{"cut inside the last record", func(b []byte, last int) []byte { return b[:len(b)-40] }, 2},
		{"cut inside the last header", func(b []byte, last int) []byte { return b[:last+5] }, 2},
		{"the last record's end zeroed", func(b []byte, last int) []byte { clear(b[len(b)-40:]); return b }, 2},
		{"zeros after the records", func(b []byte, last int) []byte { return append(b, make([]byte, 4096)...) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path, b, last := spoolSegment(t, 3)
			if err := os.WriteFile(path, tc.damage(b, last), 0o600); err != nil {
				t.Fatal(err)
			}
			sent, aside, _, _ := drainAside(t, dir, nil)
			if sent != tc.sent || len(aside) != 0 {
				t.Fatalf("sent %d, set aside %q; want %d sent and nothing set aside", sent, aside, tc.sent)
			}
		})
	}
}
