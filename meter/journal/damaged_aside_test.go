package journal

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keptAside is the suffix of a damaged segment kept aside, and
// keptAsideMost the most kept (docs/operations.md, "Durability").
const (
	keptAside     = ".damaged"
	keptAsideMost = 8
)

// damagedFiles lists the segments dir keeps aside as damaged.
func damagedFiles(t *testing.T, dir string) []string {
	t.Helper()
	kept, err := filepath.Glob(filepath.Join(dir, "*"+keptAside))
	if err != nil {
		t.Fatal(err)
	}
	return kept
}

// TestJournalKeepsADamagedSegmentAside: a segment with damaged bytes (a
// record whose crc fails, a record the file ends inside) was deleted by
// Release like any other once recovery had read what it could, and with
// it the damaged records: the ids and output of requests in flight at a
// crash, usage billed by no one. It is kept aside now, under a name no
// start reads as a segment, and the request ids still legible in the
// damaged records' headers are logged at WARN, for an operator to bill
// by hand.
func TestJournalKeepsADamagedSegmentAside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, at int) []byte
	}{
		// Request 2's begin, the last record, fails its crc (its body's
		// last byte flipped): skipped whole.
		{"a record's crc", func(b []byte, _ int) []byte { b[len(b)-1] ^= 0xff; return b }},
		// Request 2's begin cut short by the file's end, after its header.
		{"the torn tail", func(b []byte, _ int) []byte { return b[:len(b)-5] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path, b, at := segmentWith(t, []byte("tok tok tok"))
			damaged := tc.damage(bytes.Clone(b), at)
			rewrite(t, path, damaged)
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			t.Cleanup(func() { slog.SetDefault(prev) })

			j, reqs, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 1 || reqs[0].Event.ID != testEvent(1).ID {
				t.Fatalf("recovered %v, want request 1 alone", ids(reqs))
			}
			if err := j.Release(); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			warned := false
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, testEvent(2).ID) {
					warned = true
				}
			}
			if !warned {
				t.Errorf("no WARN names request 2, whose begin is damaged:\n%s", logs.String())
			}
			kept := damagedFiles(t, dir)
			if len(kept) != 1 {
				t.Fatalf("damaged segments kept aside: %v, want the one; dir holds %v", kept, dirNames(t, dir))
			}
			if got, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(got, damaged) {
				t.Fatalf("the segment kept aside does not hold the damaged bytes as they were (%v)", err)
			}
			// Never read again as a segment.
			if reqs := recovered(t, dir); len(reqs) != 0 {
				t.Fatalf("the next start recovered %v from the segment kept aside", ids(reqs))
			}
			if kept2 := damagedFiles(t, dir); len(kept2) != 1 {
				t.Fatalf("after another start, kept aside: %v", kept2)
			}
		})
	}
}

// TestJournalDamagedSegmentsAreBounded: segments kept aside as damaged
// cannot fill the disk: past keptAsideMost of them, the oldest are
// deleted.
func TestJournalDamagedSegmentsAreBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range keptAsideMost + 3 {
		j, _, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Release(); err != nil {
			t.Fatal(err)
		}
		j.Begin(testEvent(i+1), []byte(`{"model":"sim-pro"}`))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		segs, sl, err := segments(dir)
		if err != nil || len(segs) != 1 {
			t.Fatalf("segments %v (%v)", segs, err)
		}
		path := segPath(dir, segs[0], sl.seedOf(segs[0]))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0xff
		rewrite(t, path, b)
	}
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Release(); err != nil {
		t.Fatal(err)
	}
	if kept := damagedFiles(t, dir); len(kept) != keptAsideMost {
		t.Fatalf("%d damaged segments kept aside, want the newest %d: %v", len(kept), keptAsideMost, kept)
	}
}

// TestJournalReleasesAWholeSegment: a segment read whole is deleted by
// Release, not kept aside.
func TestJournalReleasesAWholeSegment(t *testing.T) {
	dir, _, _, _ := segmentWith(t, []byte("tok tok tok"))
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Release(); err != nil {
		t.Fatal(err)
	}
	if kept := damagedFiles(t, dir); len(kept) != 0 {
		t.Fatalf("an intact segment kept aside as damaged: %v", kept)
	}
	if segs, _, _ := segments(dir); len(segs) != 1 {
		t.Fatalf("segments after Release: %v, want the new one alone", segs)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
