package journal

import (
	"strings"
	"testing"
)

// TestJournalHugeCheckpoint: the gateway checkpoints the
// output an upstream streamed since the last checkpoint as it is, uncut
// (gateway/checkpoint.go); an upstream that sends one large SSE event
// (up to 8 MiB is accepted), or 16 large ones within 20 ms, makes a
// checkpoint record over scan's sanity limit (MaxBody+MaxOutput+64 KiB).
// After a kill -9, the request's output and every record journaled after it,
// by any request, must still be recovered. (Found by a review: the record
// ended its segment for the reader.)
func TestJournalHugeCheckpoint(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	big, other := testEvent(1), testEvent(2)
	j.Begin(big, body)
	j.Checkpoint(big.ID, strings.Repeat("word ", 300_000), "", nil, false) // 1.5 MB in one upstream event
	j.written(t)
	j.Begin(other, body)
	j.Checkpoint(other.ID, "tok tok tok", "", nil, false)
	j.written(t)
	j.Close() // as a kill -9: nothing ended

	_, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Request{}
	for _, r := range reqs {
		byID[r.Event.ID] = r
	}
	if r, ok := byID[big.ID]; !ok || r.Checkpoints == 0 || r.OutputLen != 1_500_000 || len(r.Output) != MaxOutput {
		t.Errorf("request %s recovered as %v with %d checkpoints, %d bytes of output (%d kept); want 1,500,000 (MaxOutput kept)",
			big.ID, ok, r.Checkpoints, r.OutputLen, len(r.Output))
	}
	if _, ok := byID[other.ID]; !ok {
		t.Errorf("request %s, begun after the large checkpoint, is not recovered at all (%d recovered)", other.ID, len(reqs))
	}
}
