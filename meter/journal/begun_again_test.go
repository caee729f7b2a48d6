package journal

import (
	"os"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestJournalCompactedCopyReplacesWhatCameBeforeItWhenItsMarkIsDamaged:
// a crash between a compaction's rename and the old segment's removal
// leaves both segments, and the new one's first record (the one naming
// the segment it replaces) can be damaged on disk. Recovery then reads
// both, and the request's merged copy in the new segment must replace
// the output read from the old one, not add to it: the request's output
// counted twice was billed twice. (A mutant that dropped that reset in
// recoverNoting survived every other test.)
func TestJournalCompactedCopyReplacesWhatCameBeforeItWhenItsMarkIsDamaged(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := testEvent(1)
	j.Begin(e, []byte(`{"a":1}`))
	j.Checkpoint(e.ID, "tok tok ", "", &usage.Tokens{PromptTokens: 7, CompletionTokens: 2}, false)
	j.Checkpoint(e.ID, "tok ", "", nil, false)
	compactLeavingTheOld(t, j)
	next := segPath(dir, j.segNum, j.seed) // the compacted copy
	b, err := os.ReadFile(next)
	if err != nil {
		t.Fatal(err)
	}
	b[4] ^= 0xff // the crc of its first record, kindCompacted
	if err := os.WriteFile(next, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := recoverOne(t, dir)
	if string(r.Output) != "tok tok tok " || r.OutputLen != 12 || r.Checkpoints != 1 {
		t.Errorf("output %q (%d bytes, %d checkpoints), want its 12 bytes once, from the merged copy",
			r.Output, r.OutputLen, r.Checkpoints)
	}
}
