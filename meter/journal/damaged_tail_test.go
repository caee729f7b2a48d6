package journal

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
)

// TestJournalWarnsOfADamagedTail: a segment whose end holds no whole
// record (zeros where a power loss left its blocks unwritten, a record
// cut short, a damaged length with nothing intact after it) lost every
// request begun there to recovery without a word: a crash review zeroed
// the segment of a gateway killed with ten streams in flight, and the next
// start recovered none of them, logged nothing and deleted the segment,
// ten requests never billed and no trace of them. The unread bytes are
// warned of now, with the segment and where they are, as the spool warns of
// its own.
func TestJournalWarnsOfADamagedTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		want   int // requests still recovered
	}{
		{"zeroed", func(b []byte) []byte { return make([]byte, len(b)) }, 0},
		{"cut inside the last record", func(b []byte) []byte { return b[:len(b)-10] }, 1},
		{"its last length damaged", func(b []byte) []byte {
			last := 0
			for off := 0; off < len(b); off += 8 + int(binary.BigEndian.Uint32(b[off:])) {
				last = off
			}
			b[last] = 0xff // request 2's begin: a length no record has, nothing intact after it
			return b
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path, b, _ := segmentWith(t, []byte("tok tok tok"))
			rewrite(t, path, tc.damage(b))
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			t.Cleanup(func() { slog.SetDefault(prev) })
			reqs := recovered(t, dir)
			if len(reqs) != tc.want {
				t.Fatalf("recovered %v, want %d requests", ids(reqs), tc.want)
			}
			if !strings.Contains(logs.String(), "journal: the end of a segment holds no whole record") ||
				!strings.Contains(logs.String(), "segment=") {
				t.Fatalf("no warning of the segment's unread end:\n%s", logs.String())
			}
		})
	}
}

// TestJournalDoesNotWarnOfAWholeSegment: a segment that ends at a record's
// end (every clean stop, and every kill -9: the kernel keeps whole
// writes) is read without a warning.
func TestJournalDoesNotWarnOfAWholeSegment(t *testing.T) {
	dir, _, _, _ := segmentWith(t, []byte("tok tok tok"))
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	if reqs := recovered(t, dir); len(reqs) != 2 {
		t.Fatalf("recovered %v, want 2 requests", ids(reqs))
	}
	if logs.Len() > 0 {
		t.Fatalf("warned of an intact segment:\n%s", logs.String())
	}
}
