package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// tornSummary is what recovery of a journal gives, as text: each request
// in flight with what a crash's estimate reads of it, and the hidden
// reasoning averages.
func tornSummary(reqs []Request, hidden map[string]int64) string {
	s := ""
	for _, r := range reqs {
		final := ""
		if r.Final != nil {
			final = fmt.Sprintf("final %s %+v", r.Final.Status, r.Final.Usage)
		}
		var rep string
		if r.Reported != nil {
			rep = fmt.Sprintf("%+v", *r.Reported)
		}
		s += fmt.Sprintf("%s body %q/%d out %q/%d reasoning %q/%d shown %v checkpoints %d reported %s %s\n",
			r.Event.ID, r.Body, r.BodyLen, r.Output, r.OutputLen, r.Reasoning, r.ReasoningLen, r.ReasoningShown,
			r.Checkpoints, rep, final)
	}
	keys := make([]string, 0, len(hidden))
	for k := range hidden {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s += fmt.Sprintf("hidden %s=%d\n", k, hidden[k])
	}
	return s
}

// TestJournalTornLastRecordOfEachKind: a crash (or a full disk) tears the
// last record a segment holds, whatever its kind: a begin, a checkpoint,
// the reasoning after it, a failed event, an end, the hidden reasoning
// averages. Recovery of the segment cut anywhere inside a record must be
// what it is cut just before that record: the torn record as if never
// written, and nothing before it lost or read twice (a torn end leaves
// its request in flight, billed by estimate, which the ledger drops
// behind its real event; a torn fail leaves the estimate from the last
// checkpoint). It must never fail to open.
func TestJournalTornLastRecordOfEachKind(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := testEvent(1), testEvent(2), testEvent(3)
	rep := &usage.Tokens{PromptTokens: 40, CompletionTokens: 3}
	j.Begin(a, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	j.Checkpoint(a.ID, "thinking hello ", "thinking ", rep, true)
	j.Begin(b, []byte(`{}`))
	j.Checkpoint(b.ID, "some output", "", nil, false)
	fb := *b
	fb.Status, fb.Usage = usage.StatusOK, usage.Tokens{PromptTokens: 9, CompletionTokens: 4}
	j.Fail(&fb)
	j.Begin(c, []byte(`{}`))
	j.Checkpoint(c.ID, "done", "", nil, false)
	j.End(c.ID)
	j.HiddenReasoning(map[string]int64{"sim-pro": 7})
	j.Checkpoint(a.ID, "world", "", &usage.Tokens{PromptTokens: 40, CompletionTokens: 5}, true)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, sl, err := segments(dir)
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v; want one", segs, err)
	}
	name := filepath.Base(segPath(dir, segs[0], sl.seedOf(segs[0])))
	whole, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	// The records' boundaries, and their kinds.
	bounds, kinds := []int{0}, []uint8{}
	for off := 0; off < len(whole); {
		n := int(binary.BigEndian.Uint32(whole[off:]))
		kinds = append(kinds, whole[off+8])
		off += 8 + n
		bounds = append(bounds, off)
	}
	if bounds[len(bounds)-1] != len(whole) {
		t.Fatalf("records end at %d of %d bytes", bounds[len(bounds)-1], len(whole))
	}
	for _, k := range []uint8{kindBegin, kindCheckpoint, kindReasoning, kindFail, kindEnd, kindHidden} {
		if !slices.Contains(kinds, k) {
			t.Fatalf("no record of kind %d in %v", k, kinds)
		}
	}
	recover := func(size int) string {
		t.Helper()
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, name), whole[:size], 0o600); err != nil {
			t.Fatal(err)
		}
		j, reqs, err := Open(d)
		if err != nil {
			t.Fatalf("Open of the segment cut at byte %d of %d: %v", size, len(whole), err)
		}
		s := tornSummary(reqs, j.RecoveredHiddenReasoning())
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	full := recover(len(whole))
	wantFull := fmt.Sprintf("%s body %q/45 out %q/20 reasoning %q/9 shown true checkpoints 2 reported %+v \n"+
		"%s body %q/2 out %q/11 reasoning \"\"/0 shown false checkpoints 1 reported  final ok %+v\nhidden sim-pro=7\n",
		a.ID, `{"messages":[{"role":"user","content":"hi"}]}`, "thinking hello world", "thinking ",
		usage.Tokens{PromptTokens: 40, CompletionTokens: 5}, b.ID, "{}", "some output", fb.Usage)
	if full != wantFull {
		t.Fatalf("the whole segment recovers\n%s\nwant\n%s", full, wantFull)
	}
	for i := range kinds {
		at, end := bounds[i], bounds[i+1]
		want := recover(at) // the segment as it was before the record
		for _, cut := range []int{at + 1, at + 4, at + 7, at + 8, at + 9, at + 8 + headerLen - 8, (at + end) / 2, end - 1} {
			if cut <= at || cut >= end {
				continue
			}
			if got := recover(cut); got != want {
				t.Errorf("record %d (kind %d, bytes %d to %d) torn at byte %d recovers\n%s\nwant, as without it,\n%s",
					i, kinds[i], at, end, cut, got, want)
			}
		}
	}
}
