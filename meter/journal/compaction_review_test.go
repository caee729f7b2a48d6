package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCompactionOnAFullDiskHidesNoLaterRecords: compaction opened the
// next segment and wrote the open requests' copy into it. When that write
// failed part-way (a full disk), compact returned the error but kept the
// new segment as the journal's segment, its torn copy in it, and nothing
// cut the torn bytes: every record written after them (once the disk had
// room again) landed behind a torn record, where recovery's reader stops,
// and a request begun and streamed after that was lost to the next crash.
// The copy is now written under another name and renamed into place only
// once whole.
func TestCompactionOnAFullDiskHidesNoLaterRecords(t *testing.T) {
	disk := metertest.SmallDisk(t, 512<<10)
	dir := filepath.Join(disk, "journal")
	withSegments(t, 200<<10)
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	long := testEvent(1)
	j.Begin(long, bytes.Repeat([]byte("b"), 120<<10)) // open through the compaction
	j.written(t)

	// The disk fills up, all but 130 KiB.
	filler := metertest.FillDisk(t, disk)
	st, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, st.Size()-130<<10); err != nil {
		t.Fatal(err)
	}
	// This begin fits, and fills the segment past maxSegment: compaction
	// copies both open requests (~205 KiB) into a new segment, in the
	// ~45 KiB left.
	short := testEvent(2)
	j.Begin(short, bytes.Repeat([]byte("s"), 85<<10))
	j.written(t)
	j.mu.Lock()
	werr := j.failing
	j.mu.Unlock()
	t.Logf("writer error after the compaction: %v", werr)

	// The operator frees the disk; the gateway goes on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := testEvent(3)
	j.Begin(after, []byte(`{"after":1}`))
	j.Checkpoint(after.ID, "streamed after the disk was freed", "", nil, false)
	j.written(t)
	time.Sleep(2 * CheckpointDelay)
	j.written(t)
	_ = j.Close() // kill -9 now: nothing ends

	segs, _, _ := segments(dir)
	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	got := map[string]Request{}
	for _, r := range reqs {
		got[r.Event.ID] = r
	}
	t.Logf("segments %v; recovered %d requests", segs, len(reqs))
	for _, w := range []struct{ id, what string }{{long.ID, "begun before the disk filled"}, {short.ID, "begun as it filled"}, {after.ID, "begun after the disk was freed"}} {
		if _, ok := got[w.id]; !ok {
			t.Errorf("request %s (%s) was not recovered", w.id, w.what)
		}
	}
	if r, ok := got[after.ID]; ok && string(r.Output) != "streamed after the disk was freed" {
		t.Errorf("request begun after the disk was freed recovered with output %q", r.Output)
	}
}

// TestAFailedCompactionDropsNoFinalEvent: a compaction whose copy could
// not be written at all (a full disk) left the open requests in the old
// segment, which it did not remove, and went on in the new one. The next
// compaction read only the new segment: a request begun in the old one
// had no begin there, so its records in the new one (its checkpoint, its
// failed final event) were skipped and not copied, and the new segment was
// removed. Recovery then found the request's begin alone and billed an
// estimate instead of the final event the gateway had. A failed compaction
// now leaves the journal in the old segment, whole.
func TestAFailedCompactionDropsNoFinalEvent(t *testing.T) {
	disk := metertest.SmallDisk(t, 512<<10)
	dir := filepath.Join(disk, "journal")
	withSegments(t, 6<<10)
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	req := testEvent(1)
	j.Begin(req, bytes.Repeat([]byte("b"), 4<<10)) // ~4.2 KiB of segment 1's first 8 KiB page pair
	j.written(t)

	// The disk fills. A begin still fits in the segment's last page, and
	// takes it past maxSegment: compaction opens segment 2 and cannot
	// write a byte of its copy into it.
	filler := metertest.FillDisk(t, disk)
	trigger := testEvent(2)
	j.Begin(trigger, bytes.Repeat([]byte("t"), 2<<10))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		j.mu.Lock()
		werr := j.compactErr
		j.mu.Unlock()
		if werr != nil {
			t.Logf("compaction on the full disk: %v", werr)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no compaction error within 5s")
		}
	}
	// The copy is written under another name, renamed into place only
	// once whole: the failed one is gone, and the journal goes on in
	// segment 1.
	if segs, _, _ := segments(dir); len(segs) != 1 || segs[0] != 1 {
		t.Fatalf("segments after the failed compaction: %v, want [1]", segs)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*"+compactingSuffix)); len(tmps) != 0 {
		t.Fatalf("the failed compaction's file was left: %v", tmps)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	// The request streams on, ends, and the spool refuses its final event:
	// it is journaled with Fail.
	j.End(trigger.ID)
	j.Checkpoint(req.ID, "tok tok tok ", "", nil, false)
	final := *req
	final.Usage.PromptTokens, final.Usage.CompletionTokens = 1234, 567
	j.Fail(&final)
	j.written(t)
	// Other requests come and go until segment 2 is compacted in turn.
	for i := 100; i < 130; i++ {
		e := testEvent(i)
		j.Begin(e, bytes.Repeat([]byte("x"), 400))
		j.End(e.ID)
		j.written(t)
	}
	_ = j.Close() // kill -9

	segs, _, _ := segments(dir)
	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	t.Logf("segments %v", segs)
	byID := map[string]Request{}
	for _, r := range reqs {
		byID[r.Event.ID] = r
	}
	if _, ok := byID[trigger.ID]; ok {
		t.Logf("the request that ended (its end was in segment 2) is recovered as in flight too")
	}
	r, ok := byID[req.ID]
	if !ok {
		t.Fatalf("request not recovered at all (%d recovered)", len(reqs))
	}
	if r.Final == nil || r.Final.Usage.CompletionTokens != 567 {
		t.Errorf("its final event (1234 prompt, 567 completion tokens) was lost: recovered final %v, output %q, %d checkpoints",
			r.Final, r.Output, r.Checkpoints)
	}
}

// TestATornCompactionCopyLosesNoOutput: compaction's copy of a request is
// written in one write of several records (a begin, then one checkpoint
// holding all its output). A kill -9 during that write (the kernel stops a
// large write between pages), or a full disk, left the copy's begin whole
// and its checkpoint torn, beside the old segment. Recovery read the old
// segment, then the copy's begin, which replaces everything before it, and
// not the torn checkpoint: "the upstream had not answered; nothing billed",
// though it streamed its output. The copy is now complete before it takes
// a segment's name; a torn one keeps its compacting name, and Open removes
// it.
func TestATornCompactionCopyLosesNoOutput(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := testEvent(1)
	j.Begin(e, []byte(`{"a":1}`))
	j.Checkpoint(e.ID, strings.Repeat("tok ", 20000), "", &usage.Tokens{PromptTokens: 7, CompletionTokens: 20000}, false)
	// The kill -9 mid-write: the old segment is still there, and the copy,
	// still under its compacting name, stops inside its checkpoint record.
	compactLeavingTheOld(t, j)
	newPath := segPath(dir, j.segNum, j.seed)
	st, err := os.Stat(newPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newPath, newPath+compactingSuffix); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(newPath+compactingSuffix, st.Size()-40000); err != nil {
		t.Fatal(err)
	}
	r := recoverOne(t, dir)
	if _, err := os.Stat(newPath + compactingSuffix); !os.IsNotExist(err) {
		t.Errorf("Open left the torn copy: %v", err)
	}
	if r.Checkpoints == 0 || r.OutputLen != 80000 || r.Reported == nil {
		t.Errorf("recovered with %d checkpoints, %d bytes of output, report %v; want its 80,000 bytes and the provider's report",
			r.Checkpoints, r.OutputLen, r.Reported)
	}
}
