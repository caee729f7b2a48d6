package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJournalReadsSegmentsWrittenBeforeItHadAKey: a journal left by a
// release before records were sealed has plain crcs. Its requests are
// recovered, the key is made for the segments after it, and a crash
// before they are released recovers both kinds.
func TestJournalReadsSegmentsWrittenBeforeItHadAKey(t *testing.T) {
	dir := t.TempDir()
	old := Request{Event: *testEvent(1), Body: []byte(`{"model":"sim-pro"}`), BodyLen: 19, Began: time.Now(), Last: time.Now()}
	if err := os.WriteFile(segPath(dir, 7), appendRequest(nil, &old, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	j, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].Event.ID != testEvent(1).ID {
		t.Fatalf("recovered %v from the unsealed segment, want request 1", ids(reqs))
	}
	if j.seal.seed == 0 || j.seal.since != 8 {
		t.Fatalf("seal %+v, want a seed for segments from 8 on", j.seal)
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

// TestJournalRecordsAreSealedWithItsKey: the records a journal writes are
// intact under its key alone, so a plain crc (what a forger computes) is
// not taken for one of them.
func TestJournalRecordsAreSealedWithItsKey(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.Begin(testEvent(1), []byte(`{"model":"sim-pro"}`))
	n := j.segNum
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	sl, err := loadSeal(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if kind, _, _ := firstRecord(segPath(dir, n), sl.seedOf(n)); kind != kindBegin {
		t.Fatalf("the first record under the journal's seed is kind %d, want a begin", kind)
	}
	if kind, _, _ := firstRecord(segPath(dir, n), 0); kind != 0 {
		t.Fatalf("the first record is intact under a plain crc (kind %d): it is not sealed", kind)
	}
}

// TestJournalWithADamagedKeyDoesNotOpen: without its key the journal
// cannot tell its records from forged ones, so it does not guess: Open
// says what is wrong and what to do.
func TestJournalWithADamagedKeyDoesNotOpen(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.Begin(testEvent(1), []byte(`{"model":"sim-pro"}`))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, keyFile)
	b, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	b[9] ^= 0x01
	rewrite(t, key, b)
	if _, _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "move the journal directory aside") {
		t.Fatalf("Open with a damaged key: %v, want an error saying so", err)
	}
}
