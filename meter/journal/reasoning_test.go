package journal

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestJournalKeepsReasoningApart: the reasoning a stream showed as text is
// journaled apart from the rest of its output, through compaction too, so
// that a crashed request is billed it as reasoning tokens (the gateway's
// Recover), the bytes beyond MaxOutput by their length.
func TestJournalKeepsReasoningApart(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, big := testEvent(1), testEvent(2)
	j.Begin(e, []byte(`{"a":1}`))
	j.Checkpoint(e.ID, "hmm let me see ", "hmm let me see ", &usage.Tokens{PromptTokens: 7, CompletionTokens: 1}, true)
	j.Checkpoint(e.ID, "so it is 42", "so ", nil, true)
	long := strings.Repeat("think ", MaxOutput/6+100)
	j.Begin(big, []byte(`{"b":2}`))
	j.Checkpoint(big.ID, long, long, nil, true)
	compactLeavingTheOld(t, j)
	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	byID := map[string]Request{}
	for _, r := range reqs {
		byID[r.Event.ID] = r
	}
	if r := byID[e.ID]; string(r.Reasoning) != "hmm let me see so " || r.ReasoningLen != 18 ||
		string(r.Output) != "hmm let me see so it is 42" || !r.ReasoningShown || r.Reported == nil {
		t.Errorf("request: reasoning %q (%d bytes), output %q, shown %v, reported %+v; want the reasoning apart",
			r.Reasoning, r.ReasoningLen, r.Output, r.ReasoningShown, r.Reported)
	}
	if r := byID[big.ID]; len(r.Reasoning) != MaxOutput || r.ReasoningLen != len(long) || r.OutputLen != len(long) {
		t.Errorf("long reasoning: %d bytes kept of %d, output %d; want %d of %d", len(r.Reasoning), r.ReasoningLen, r.OutputLen, MaxOutput, len(long))
	}
}
