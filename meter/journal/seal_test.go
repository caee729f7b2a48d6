package journal

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestJournalReadsSegmentsWrittenBeforeRecordsWereSealed: a journal left
// by a release before records were sealed has plain crcs, in segments
// named without a seed. Its requests are recovered, and a crash before
// they are released recovers them beside the sealed ones written since.
func TestJournalReadsSegmentsWrittenBeforeRecordsWereSealed(t *testing.T) {
	dir := t.TempDir()
	old := Request{Event: *testEvent(1), Body: []byte(`{"model":"sim-pro"}`), BodyLen: 19, Began: time.Now(), Last: time.Now()}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000007.journal"), appendRequest(nil, &old, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	j, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].Event.ID != testEvent(1).ID {
		t.Fatalf("recovered %v from the unsealed segment, want request 1", ids(reqs))
	}
	if j.seed == 0 || j.segNum != 8 {
		t.Fatalf("writing segment %d with seed %x, want segment 8 sealed", j.segNum, j.seed)
	}
	j.Begin(testEvent(2), []byte(`{"model":"sim-pro"}`))
	if err := j.Close(); err != nil { // not released: a crash before request 1 was recorded
		t.Fatal(err)
	}
	j, reqs, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(reqs) != 2 || reqs[0].Event.ID != testEvent(1).ID || reqs[1].Event.ID != testEvent(2).ID {
		t.Fatalf("recovered %v, want request 1 (unsealed) and 2 (sealed)", ids(reqs))
	}
}

// TestJournalRecordsAreSealedWithTheirSegmentsSeed: the records a journal
// writes are intact under their segment's seed alone, so a plain crc
// (what a forger computes) is not taken for one of them; each process
// draws a seed of its own, and the segments keep theirs through a copy
// to another directory.
func TestJournalRecordsAreSealedWithTheirSegmentsSeed(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.Begin(testEvent(1), []byte(`{"model":"sim-pro"}`))
	n, seed := j.segNum, j.seed
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := segPath(dir, n, seed)
	if kind, _, _ := firstRecord(path, seed); kind != kindBegin {
		t.Fatalf("the first record under its segment's seed is kind %d, want a begin", kind)
	}
	if kind, _, _ := firstRecord(path, 0); kind != 0 {
		t.Fatalf("the first record is intact under a plain crc (kind %d): it is not sealed", kind)
	}

	copied := t.TempDir() // the segments alone, as a snapshot of the disk takes them
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copied, filepath.Base(path)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	j2, reqs, err := Open(copied)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(reqs) != 1 || reqs[0].Event.ID != testEvent(1).ID {
		t.Fatalf("recovered %v from the copied segment, want request 1", ids(reqs))
	}
	if j2.seed == seed {
		t.Fatalf("two processes drew the same seed %x", seed)
	}
}

func TestParseSegment(t *testing.T) {
	for _, c := range []struct {
		name string
		n    uint64
		seed uint32
		ok   bool
	}{
		{"00000000000000000007.journal", 7, 0, true},
		{"00000000000000000007-0a0b0c0d.journal", 7, 0x0a0b0c0d, true},
		{filepath.Base(segPath("", 12, 0xffffffff)), 12, 0xffffffff, true},
		{"00000000000000000007-00000000.journal", 0, 0, false}, // 0 is no seed: the name is not ours
		{"00000000000000000007-zz.journal", 0, 0, false},
		{"00000000000000000007-1ffffffff.journal", 0, 0, false},
		{"x.journal", 0, 0, false},
		{"00000000000000000007.journal.compacting", 0, 0, false},
	} {
		n, seed, ok := parseSegment(c.name)
		if n != c.n || seed != c.seed || ok != c.ok {
			t.Errorf("parseSegment(%q) = %d, %x, %v; want %d, %x, %v", c.name, n, seed, ok, c.n, c.seed, c.ok)
		}
	}
}
