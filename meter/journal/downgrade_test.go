package journal

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestJournalReasoningReadByThePreviousRelease: a journal with reasoning
// shown as text, read as the release before the reasoning was journaled
// apart reads it (163c603: a checkpoint is [flags][counts if 1][skipped if
// 4][output], every other byte output; unknown record kinds ignored), gives
// each request the output it streamed, once: a downgrade (or a rollback of
// a bad deploy) on the same data directory must not bill the reasoning
// twice, with the lengths of the journal's own fields as text.
func TestJournalReasoningReadByThePreviousRelease(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, c := testEvent(1), testEvent(2)
	j.Begin(e, []byte(`{"a":1}`))
	j.Checkpoint(e.ID, "hmm let me see ", "hmm let me see ", &usage.Tokens{PromptTokens: 7, CompletionTokens: 1}, true)
	j.Checkpoint(e.ID, "so it is 42", "so ", nil, true)
	j.Begin(c, []byte(`{"c":3}`))
	j.Checkpoint(c.ID, "thinking... done", "thinking... ", nil, true)
	want := map[string]string{e.ID: "hmm let me see so it is 42", c.ID: "thinking... done"}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		segs, s, err := segments(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range segs {
			err := scan(segPath(dir, n, s.seedOf(n)), n, -1, s.seedOf(n), func(kind uint8, id [16]byte, _ time.Time, payload []byte) {
				if kind == kindBegin {
					got[uuid.UUID(id).String()] = "" // compaction's copy starts it over
				}
				if kind != kindCheckpoint {
					return
				}
				flags, rest := payload[0], payload[1:]
				if flags&flagReported != 0 {
					rest = rest[48:]
				}
				if flags&flagSkipped != 0 {
					rest = rest[8:]
				}
				got[uuid.UUID(id).String()] += string(rest)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: the previous release reads request %s's output as %q (%d bytes); want %q (%d bytes)",
					when, id, strings.ToValidUTF8(got[id], "?"), len(got[id]), w, len(w))
			}
		}
	}
	check("as written")
	j, _, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	compactLeavingTheOld(t, j)
	check("compacted")
}
