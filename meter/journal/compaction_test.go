package journal

// The journal's compaction: what a full segment keeps, what happens to the
// records written while it runs, and a crash in the middle of it.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestJournalCompacts: as segments fill, the journal keeps only what is in
// flight, merged, and recovery still sees every open request whole.
func TestJournalCompacts(t *testing.T) {
	j, dir := openWithSegments(t, 64<<10)
	long := testEvent(0) // open through every compaction
	j.Begin(long, bytes.Repeat([]byte("b"), 1000))
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		e := testEvent(i)
		j.Begin(e, bytes.Repeat([]byte("x"), 200))
		j.Checkpoint(e.ID, "tok ", "", nil, false)
		j.End(e.ID)
		if i%10 == 0 {
			j.Checkpoint(long.ID, "out ", "", &usage.Tokens{PromptTokens: int64(i)}, false)
			want.WriteString("out ")
		}
		if i%500 == 0 {
			j.written(t)
		}
	}
	j.Close() // the writer, and any compaction it was doing, is done
	segs, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	if len(segs) != 1 {
		t.Errorf("%d segments after compaction, want 1", len(segs))
	}
	if st, err := os.Stat(segs[len(segs)-1]); err != nil || st.Size() > 2*maxSegment {
		t.Errorf("segment size %v (%v)", st, err)
	}
	_, reqs, err := Open(dir)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("recovered %d requests (%v), want 1", len(reqs), err)
	}
	r := reqs[0]
	if r.Event.ID != long.ID || string(r.Output) != want.String() || r.BodyLen != 1000 || r.Reported == nil || r.Reported.PromptTokens != 3000 {
		t.Fatalf("recovered %s with %d bytes of output (want %d), body %d, reported %+v", r.Event.ID, len(r.Output), want.Len(), r.BodyLen, r.Reported)
	}
}

// TestJournalCompactionDoesNotHoldBeginsBack: compaction held the
// segment's lock while it read the segment and wrote and fsync'd its
// replacement, 5 to 7 ms for an 8 MiB segment, and every request start
// waited behind it. Now begins go on writing to the segment meanwhile;
// what they write is copied to the new segment, once, after the merged
// records, and recovery sees it as it was written.
func TestJournalCompactionDoesNotHoldBeginsBack(t *testing.T) {
	j, dir := openWithSegments(t, 64<<10)
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	a, b, c, d := testEvent(1), testEvent(2), testEvent(3), testEvent(4)
	j.Begin(a, body)
	j.Checkpoint(a.ID, "before ", "", nil, false)
	j.Begin(b, body)
	hooked := make(chan struct{})
	compactHook = func() { // on the writer goroutine, the new segment written
		compactHook = nil
		defer close(hooked)
		done := make(chan struct{})
		go func() {
			defer close(done)
			j.Begin(c, body)
			j.Checkpoint(a.ID, "during", "", nil, false)
			j.End(b.ID)
			j.Begin(d, body) // writes the checkpoint and the end with it
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("a Begin waited for the compaction under way")
		}
	}
	t.Cleanup(func() { compactHook = nil })
	for i := 10; i < 400; i++ { // fills the segment past maxSegment
		e := testEvent(i)
		j.Begin(e, body)
		j.End(e.ID)
	}
	select {
	case <-hooked:
	case <-time.After(10 * time.Second):
		t.Fatal("no compaction")
	}
	j.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	if len(segs) != 1 {
		t.Errorf("%d segments after compaction, want 1", len(segs))
	}
	_, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range reqs {
		got[r.Event.ID] = string(r.Output)
	}
	want := map[string]string{a.ID: "before during", c.ID: "", d.ID: ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("recovered %v, want %v (request id: output)", got, want)
	}
}

// TestJournalOpenRequestsFillingASegmentDoNotCompactOverAndOver: when the
// requests open alone fill more than a segment (10,000 idle streams with
// their bodies hold about 10 MB against maxSegment's 8 MiB), every segment
// compaction made was full at once, and the writer compacted again at its
// next wake: two to three compactions a second while the streams opened,
// each rereading and rewriting every open request. The next compaction
// waits for the segment to double what the last one left.
func TestJournalOpenRequestsFillingASegmentDoNotCompactOverAndOver(t *testing.T) {
	j, dir := openWithSegments(t, 64<<10)
	body := bytes.Repeat([]byte("b"), 400)
	for i := range 300 { // about 150 KB of open requests: over two segments' worth
		j.Begin(testEvent(i), body)
	}
	j.written(t)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	segNum := func() uint64 {
		j.fmu.Lock()
		defer j.fmu.Unlock()
		return j.segNum
	}
	// Settled: compacted, everything buffered written (writes hold fmu),
	// and no compaction due (one due or under way leaves segSize at or
	// past the threshold until it is done). Only then is the count taken,
	// so that a compaction of the opening burst, still under way, is not
	// counted against the short requests.
	waitFor("the compactions of the open requests", func() bool {
		j.fmu.Lock()
		defer j.fmu.Unlock()
		j.mu.Lock()
		buffered := len(j.buf)
		j.mu.Unlock()
		return j.segNum > 1 && buffered == 0 && j.segSize < max(j.segLimit, j.compactAt)
	})
	first := segNum()
	for i := 1000; i < 1050; i++ { // 50 short requests, each waking the writer
		e := testEvent(i)
		j.Begin(e, []byte("x"))
		j.End(e.ID)
		j.written(t)
	}
	if n := segNum() - first; n > 1 {
		t.Errorf("%d compactions while 50 short requests came and went, the open ones unchanged; want at most 1", n)
	}
	j.Close()
	_, reqs, err := Open(dir)
	if err != nil || len(reqs) != 300 {
		t.Fatalf("recovered %d requests (%v), want the 300 open", len(reqs), err)
	}
}

// TestJournalCompactionKeepsEachOpenKind: compaction reads only the open
// requests' records; a request begun and not answered, one checkpointed
// and one whose final event failed all come through compactions whole,
// interleaved with ended requests, and no ended request comes back.
func TestJournalCompactionKeepsEachOpenKind(t *testing.T) {
	j, dir := openWithSegments(t, 32<<10)
	begun, streaming, failed := testEvent(100001), testEvent(100002), testEvent(100003)
	for i := 1; i <= 2000; i++ {
		e := testEvent(i)
		j.Begin(e, bytes.Repeat([]byte("x"), 100))
		j.Checkpoint(e.ID, "tok ", "", &usage.Tokens{PromptTokens: 1}, true)
		switch i {
		case 500:
			j.Begin(begun, []byte(`{"begun":1}`))
		case 700:
			j.Begin(streaming, []byte(`{"streaming":1}`))
		case 900:
			j.Begin(failed, []byte(`{"failed":1}`))
			j.Checkpoint(failed.ID, "f", "", nil, false)
			final := *failed
			final.Status, final.Usage = usage.StatusOK, usage.Tokens{PromptTokens: 9, CompletionTokens: 4}
			j.Fail(&final)
		}
		if i >= 700 && i%100 == 0 {
			j.Checkpoint(streaming.ID, "s", "", &usage.Tokens{CompletionTokens: int64(i)}, false)
		}
		j.End(e.ID)
		if i%250 == 0 {
			j.written(t)
		}
	}
	j.Close()
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.journal")); len(segs) != 1 || strings.HasSuffix(segs[0], "00001.journal") {
		t.Fatalf("segments %v: want one, compacted", segs)
	}
	_, reqs, err := Open(dir)
	if err != nil || len(reqs) != 3 {
		t.Fatalf("recovered %d requests (%v), want 3", len(reqs), err)
	}
	byID := map[string]Request{}
	for _, r := range reqs {
		byID[r.Event.ID] = r
	}
	if r := byID[begun.ID]; string(r.Body) != `{"begun":1}` || r.Checkpoints != 0 || r.Final != nil {
		t.Errorf("begun: %+v", r)
	}
	if r := byID[streaming.ID]; string(r.Body) != `{"streaming":1}` || string(r.Output) != strings.Repeat("s", 14) ||
		r.Reported == nil || r.Reported.CompletionTokens != 2000 || r.Final != nil {
		t.Errorf("streaming: output %q reported %+v final %+v", r.Output, r.Reported, r.Final)
	}
	if r := byID[failed.ID]; string(r.Output) != "f" || r.Final == nil || r.Final.Usage.CompletionTokens != 4 {
		t.Errorf("failed: output %q final %+v", r.Output, r.Final)
	}
}

// TestJournalCompactionCrashCountsOutputOnce: compaction writes the open
// requests of a segment, merged, into the next one, fsyncs it and then
// removes the old one. A crash between the two leaves both, and recovery
// read each request's output from the old segment's checkpoints and again
// from the new one's merged checkpoint: billed twice. Recovery now lets
// the copy replace what came before it.
func TestJournalCompactionCrashCountsOutputOnce(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, other := testEvent(1), testEvent(2)
	j.Begin(e, []byte(`{"a":1}`))
	j.Checkpoint(e.ID, "tok tok ", "", &usage.Tokens{PromptTokens: 7, CompletionTokens: 2}, false)
	j.Checkpoint(e.ID, "tok ", "", nil, false)
	j.Begin(other, []byte(`{"b":2}`))
	final := *other
	final.Usage = usage.Tokens{PromptTokens: 5, CompletionTokens: 3}
	j.Fail(&final)
	compactLeavingTheOld(t, j) // the crash: the old segment is still there beside the new one
	if segs, _, _ := segments(dir); len(segs) != 2 {
		t.Fatalf("segments %v, want the old one and its compacted copy", segs)
	}
	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(reqs) != 2 {
		t.Fatalf("recovered %d requests, want 2", len(reqs))
	}
	byID := map[string]Request{}
	for _, r := range reqs {
		byID[r.Event.ID] = r
	}
	r := byID[e.ID]
	if string(r.Output) != "tok tok tok " || r.OutputLen != 12 || string(r.Body) != `{"a":1}` ||
		r.Reported == nil || r.Reported.CompletionTokens != 2 {
		t.Errorf("streaming request: output %q (%d bytes), body %q, reported %+v; want its 12 bytes of output once",
			r.Output, r.OutputLen, r.Body, r.Reported)
	}
	if f := byID[other.ID].Final; f == nil || f.Usage.CompletionTokens != 3 {
		t.Errorf("failed request: final %+v, want its final event", f)
	}
}

// BenchmarkCompactionRead reads a full segment of short requests, nearly
// all ended, as compaction does: "all" decodes every request (as it did),
// "open" only the open ones.
func BenchmarkCompactionRead(b *testing.B) {
	j, dir := openWithSegments(b, 1<<30) // one segment, as compaction finds it full
	body := bytes.Repeat([]byte("x"), 400)
	open := map[[16]byte]bool{}
	for i := 1; i <= 10000; i++ {
		e := testEvent(i)
		j.Begin(e, body)
		j.Checkpoint(e.ID, "tok tok tok tok tok tok tok tok tok tok ", "", &usage.Tokens{PromptTokens: 50, CompletionTokens: 10}, false)
		if i%100 == 0 {
			id, _ := parseID(e.ID)
			open[id] = true
			continue
		}
		j.End(e.ID)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	segs, sl, err := segments(dir)
	if err != nil || len(segs) != 1 {
		b.Fatalf("segments %v (%v)", segs, err)
	}
	for name, only := range map[string]map[[16]byte]bool{"all": nil, "open": open} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				reqs, _, err := recoverSegments(dir, segs, only, sl)
				if err != nil || len(reqs) != 100 {
					b.Fatalf("%d requests (%v)", len(reqs), err)
				}
			}
		})
	}
}

// openWithSegments opens a journal in a new directory whose segments are
// compacted at size bytes (maxSegment, put back when the test ends).
func openWithSegments(tb testing.TB, size int64) (*Journal, string) {
	tb.Helper()
	withSegments(tb, size)
	dir := tb.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return j, dir
}

// compactLeavingTheOld closes j (its writer stopped, compact runs alone),
// compacts its segment, and puts the old segment back, as a crash between
// the new segment's rename and the old one's removal leaves them.
func compactLeavingTheOld(t *testing.T, j *Journal) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	oldPath := segPath(j.dir, j.segNum, j.seed)
	old, err := os.ReadFile(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.compact(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oldPath, old, 0o600); err != nil {
		t.Fatal(err)
	}
}

// recoverOne opens the journal in dir (closed when the test ends) and
// returns the one request it recovers, failing the test on any other count.
func recoverOne(t *testing.T, dir string) Request {
	t.Helper()
	j, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	if len(reqs) != 1 {
		t.Fatalf("recovered %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

// withSegments has journals compact their segments at size bytes
// (maxSegment, put back when the test ends).
func withSegments(tb testing.TB, size int64) {
	old := maxSegment
	tb.Cleanup(func() { maxSegment = old })
	maxSegment = size
}
