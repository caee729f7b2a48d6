package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

func testEvent(i int) *usage.Event {
	return &usage.Event{Version: 1, ID: fmt.Sprintf("0197a3c2-1111-7222-8333-%012d", i), Time: time.Now().UTC(),
		CustomerID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", KeyID: "0197a3c2-9999-7888-8777-666655554444",
		Provider: "sim", Model: "sim-pro", Endpoint: "/v1/chat/completions", Stream: true,
		Status: usage.StatusOK, UsageSource: usage.SourceEstimated, Usage: usage.Tokens{PromptTokens: int64(i)}}
}

// churn begins and ends n requests (several compactions, on a journal
// of small segments).
func (j *Journal) churn(n int) {
	for i := range n {
		e := testEvent(i)
		j.Begin(e, []byte("{}"))
		j.End(e.ID)
	}
}

// written waits until the writer has written everything buffered.
func (j *Journal) written(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		j.mu.Lock()
		n := len(j.buf)
		j.mu.Unlock()
		if n == 0 {
			time.Sleep(5 * time.Millisecond) // the write in progress
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("journal not written within 5s")
		}
	}
}

func TestJournalRecoversWhatDidNotEnd(t *testing.T) {
	dir := t.TempDir()
	j, reqs, err := Open(dir)
	if err != nil || len(reqs) != 0 {
		t.Fatalf("Open of an empty journal = %v, %v", reqs, err)
	}
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	ended, streaming, failed := testEvent(1), testEvent(2), testEvent(3)
	for _, e := range []*usage.Event{ended, streaming, failed} {
		j.Begin(e, body)
	}
	j.Checkpoint(streaming.ID, "tok tok ", "", nil, false)
	reported := usage.Tokens{PromptTokens: 12, CachedTokens: 6}
	j.Checkpoint(streaming.ID, "tok ", "", &reported, true)
	j.End(ended.ID)
	final := *failed
	final.Status, final.Usage = usage.StatusOK, usage.Tokens{PromptTokens: 9, CompletionTokens: 4}
	j.Fail(&final)
	j.End("not-an-id") // ignored
	if j.Open() != 2 {
		t.Fatalf("Open() = %d requests in flight, want 2", j.Open())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil { // idempotent
		t.Fatal(err)
	}

	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(reqs) != 2 || reqs[0].Event.ID != streaming.ID || reqs[1].Event.ID != failed.ID {
		t.Fatalf("recovered %+v, want the streaming and the failed request", reqs)
	}
	s := reqs[0]
	if string(s.Output) != "tok tok tok " || s.OutputLen != 12 || string(s.Body) != string(body) || s.BodyLen != len(body) ||
		s.Reported == nil || *s.Reported != reported || !s.ReasoningShown || s.Final != nil || s.Last.Before(s.Began) {
		t.Fatalf("streaming request recovered as %+v", s)
	}
	if f := reqs[1]; f.Final == nil || f.Final.Usage != final.Usage {
		t.Fatalf("failed request recovered as %+v", f)
	}
	// Until Release, a crash during recovery finds them again.
	if err := j2.Release(); err != nil {
		t.Fatal(err)
	}
	j2.Close()
	_, again, err := Open(dir)
	if err != nil || len(again) != 0 {
		t.Fatalf("after Release: %d requests, %v", len(again), err)
	}
}

// TestJournalWritesALoneCheckpoint: a checkpoint wakes no writer (streams
// checkpoint every few chunks), yet one that no other record follows is
// written within CheckpointDelay: a stream that goes quiet, then dies with
// its process, still has its output journaled.
func TestJournalWritesALoneCheckpoint(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	e := testEvent(1)
	j.Begin(e, []byte("{}"))
	j.written(t)
	took := time.Now()
	j.Checkpoint(e.ID, "tok tok ", "", nil, false)
	j.mu.Lock()
	buffered := len(j.buf)
	j.mu.Unlock()
	if buffered == 0 {
		t.Fatal("the checkpoint was written at once: it should wait for the writer's next write")
	}
	for {
		reqs, _, err := recoverSegments(dir, []uint64{j.segNum}, nil, seals{j.segNum: j.seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) == 1 && string(reqs[0].Output) == "tok tok " {
			t.Logf("written %v after the checkpoint", time.Since(took).Round(time.Millisecond))
			return
		}
		if time.Since(took) > 2*time.Second {
			t.Fatalf("checkpoint not in the segment 2s after it was taken (CheckpointDelay %v): %+v", CheckpointDelay, reqs)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestJournalSurvivesKill9: a child process journals requests (beginning,
// checkpointing and ending them) and is killed with SIGKILL: no fsync ran
// for them, yet every request it had journaled and not ended is recovered,
// with its output, and none it ended.
func TestJournalSurvivesKill9(t *testing.T) {
	if dir := os.Getenv("TOLLGATE_JOURNAL_CHILD"); dir != "" {
		j, _, err := Open(dir)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			e := testEvent(i)
			j.Begin(e, []byte("{}"))
			j.Checkpoint(e.ID, strings.Repeat("tok ", i%7+1), "", nil, false)
			if i%2 == 0 {
				j.End(e.ID)
			}
			if i%100 == 99 {
				j.written(t)
				fmt.Println("written", i)
			}
		}
	}
	dir := t.TempDir()
	written := metertest.KillChild(t, "TestJournalSurvivesKill9", "TOLLGATE_JOURNAL_CHILD="+dir, "written ", 3000)
	j, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got := map[string]Request{}
	for _, r := range reqs {
		got[r.Event.ID] = r
	}
	for i := 0; i <= written; i++ {
		id := testEvent(i).ID
		r, ok := got[id]
		switch {
		case i%2 == 0 && ok:
			t.Fatalf("request %d ended before the kill, but was recovered", i)
		case i%2 == 1 && !ok:
			t.Fatalf("request %d was journaled before the kill but not recovered (%d recovered)", i, len(reqs))
		case i%2 == 1 && string(r.Output) != strings.Repeat("tok ", i%7+1):
			t.Fatalf("request %d recovered with output %q", i, r.Output)
		}
	}
	t.Logf("%d requests journaled before SIGKILL, %d recovered in flight", written+1, len(reqs))
}

// TestJournalKeepsHiddenReasoning: the averages a gateway journals survive
// compaction and a restart.
func TestJournalKeepsHiddenReasoning(t *testing.T) {
	j, dir := openWithSegments(t, 32<<10)
	if j.RecoveredHiddenReasoning() != nil {
		t.Fatal("averages from nowhere")
	}
	j.HiddenReasoning(map[string]int64{"sim-pro": 3})
	j.HiddenReasoning(map[string]int64{"sim-pro": 11, "o3": 250})
	j.churn(2000) // several compactions
	j.written(t)
	j.Close()
	j2, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if got := j2.RecoveredHiddenReasoning(); got["sim-pro"] != 11 || got["o3"] != 250 || len(got) != 2 {
		t.Fatalf("recovered %v", got)
	}
}

// TestDecodeHiddenOfAnEarlierRelease: releases before stop 29 journaled
// fractional averages; their whole part is read, a tiny one written with
// an exponent is skipped, and what is not JSON is refused.
func TestDecodeHiddenOfAnEarlierRelease(t *testing.T) {
	m, ok := decodeHidden([]byte(`{"sim-pro":11.5,"o3":250,"tiny":5e-07,"neg":-2.75}`))
	if !ok || m["sim-pro"] != 11 || m["o3"] != 250 || m["neg"] != -2 || len(m) != 3 {
		t.Fatalf("decodeHidden = %v, %v", m, ok)
	}
	if _, ok := decodeHidden([]byte(`{"sim-pro":`)); ok {
		t.Fatal("a torn record was read")
	}
}

// TestJournalCorruptRecordMidSegmentKeepsTheRecordsAfterIt: a damaged
// byte in a record in the middle of a segment (bit rot, a bad sector: a
// crash tears only the tail) ended the segment's reading, as a torn tail
// does, without a word: every request begun after it was lost to
// recovery, and its usage never billed. Only the damaged record's request
// may be lost.
func TestJournalCorruptRecordMidSegmentKeepsTheRecordsAfterIt(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		j.Begin(testEvent(i), []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`))
		j.written(t)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	path := segs[len(segs)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The 2nd record (request 2's begin): a flipped byte in its body.
	second := 8 + (int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3]))
	b[second+60] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	var got []int64
	for _, r := range reqs {
		got = append(got, r.Event.Usage.PromptTokens)
	}
	if fmt.Sprint(got) != "[1 3 4]" {
		t.Fatalf("recovered requests %v, want [1 3 4]", got)
	}
}

// TestJournalBeginIsWrittenWhenItReturns: the gateway sends a request
// upstream as soon as Begin returns. Begin only buffered the record, for
// the writer goroutine to write a moment later, so a kill -9 in between
// lost a request the upstream had already served: nothing of it in the
// journal, no crashed event, its usage never billed (the fault suite's
// kill -9 phase found the ledger one event short). What the file holds
// when Begin returns is what a kill -9 then leaves.
func TestJournalBeginIsWrittenWhenItReturns(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	for i := range 200 {
		e := testEvent(i)
		j.Begin(e, body)
		reqs := inFiles(t, dir)
		if len(reqs) != i+1 || reqs[i].Event.ID != e.ID {
			t.Fatalf("Begin of request %d returned; the journal's files hold %d requests begun, want %d", i, len(reqs), i+1)
		}
	}
}

// TestJournalBeginsTogetherAreEachWrittenWhenTheyReturn: as
// TestJournalBeginIsWrittenWhenItReturns, with begins from several
// goroutines at once and the writer goroutine writing ends meanwhile (the
// records buffered before a begin go out in its write). Each Begin must
// return only once its own record is in the file. A group write of begins
// was tried with this test (BENCHMARKS.md, "Issue 16, stop 38"): it fails
// when a begin is counted as written by a write that left before the begin
// joined it, which goes upstream with nothing journaled.
func TestJournalBeginsTogetherAreEachWrittenWhenTheyReturn(t *testing.T) {
	j, dir := openWithSegments(t, maxSegment)
	defer j.Close()
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	const goroutines, each = 8, 60
	missing := make(chan string, goroutines*each)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				e := testEvent(g*each + i)
				j.Begin(e, body)
				if held, err := filesHold(dir, e.ID); err != nil || !held {
					missing <- fmt.Sprintf("%s (%v)", e.ID, err)
				}
				if i%2 == 1 {
					j.End(e.ID) // the writer goroutine writes too, woken by ends
				}
			}
		})
	}
	wg.Wait()
	close(missing)
	for id := range missing {
		t.Errorf("Begin of %s returned before its record was in the journal's files", id)
	}
	j.Close() // writes the last ends, buffered still
	if reqs := inFiles(t, dir); len(reqs) != goroutines*each/2 {
		t.Errorf("the journal holds %d requests begun and not ended, want %d", len(reqs), goroutines*each/2)
	}
}

// filesHold reports whether the journal's segment files in dir hold the
// text s (a begin record holds its event's id as text).
func filesHold(dir, s string) (bool, error) {
	segs, sl, err := segments(dir)
	if err != nil {
		return false, err
	}
	for _, n := range segs {
		b, err := os.ReadFile(segPath(dir, n, sl.seedOf(n)))
		if err != nil {
			return false, err
		}
		if bytes.Contains(b, []byte(s)) {
			return true, nil
		}
	}
	return false, nil
}

// TestJournalARetriedAttemptStaysOpen: a retried attempt's begin reuses its
// request's id, right after the end of the attempt before (see the
// gateway's exchange.retire). Begin writes its record itself; when it wrote
// only its own, the end still buffered could land after it, and recovery
// took the retried attempt, in flight, for ended: a kill -9 then lost it.
// Begin writes what is buffered first.
func TestJournalARetriedAttemptStaysOpen(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 100 {
		e := testEvent(i)
		j.Begin(e, nil)
		j.End(e.ID)
		j.Begin(e, nil) // the next attempt
		j.written(t)
		reqs := inFiles(t, dir)
		if len(reqs) != i+1 || reqs[i].Event.ID != e.ID {
			t.Fatalf("request %d's next attempt in flight: the journal's files hold %d requests open, want %d", i, len(reqs), i+1)
		}
	}
}

// inFiles returns the requests open in the journal's files in dir, as a
// process started now would recover them (the journal that writes them
// still open: a kill -9 at this point).
func inFiles(t *testing.T, dir string) []Request {
	t.Helper()
	segs, sl, err := segments(dir)
	if err != nil {
		t.Fatal(err)
	}
	reqs, _, err := recoverSegments(dir, segs, nil, sl)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestJournalBeginOfAnEventJSONCannotHold: an event whose time JSON cannot
// hold (year 10000) is begun under its id alone, with the request's body
// after it, and recovered so; the events around it are whole.
func TestJournalBeginOfAnEventJSONCannotHold(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	odd := testEvent(2)
	odd.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	body := []byte(`{"model":"sim-pro"}`)
	j.Begin(testEvent(1), body)
	j.Begin(odd, body)
	j.Begin(testEvent(3), body)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(reqs) != 3 {
		t.Fatalf("recovered %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if string(r.Body) != string(body) || r.BodyLen != len(body) {
			t.Errorf("request %d recovered with body %q (%d)", i, r.Body, r.BodyLen)
		}
	}
	if r := reqs[1]; r.Event.ID != odd.ID || r.Event.CustomerID != "" {
		t.Errorf("the odd event recovered as %+v, want its id alone", r.Event)
	}
	if r := reqs[2]; r.Event.ID != testEvent(3).ID || r.Event.CustomerID == "" || r.Event.Usage.PromptTokens != 3 {
		t.Errorf("the event after it recovered as %+v", r.Event)
	}
}

// BenchmarkBegin: requests beginning and ending, each Begin waiting for
// its record's write, while the writer fsyncs the segment every second and
// compacts it every 8 MiB (maxSegment); ns/op is per request, and p50_µs,
// p99_µs, p999_µs and max_µs the waits of one Begin. In "saturated" one
// goroutine per CPU begins requests back to back (its waits are mostly the
// scheduler's); in "paced" one goroutine begins a request with a 4 KiB body
// every 250 µs, so that a Begin waits only for the journal.
// BENCHMARKS.md has the figures.
func BenchmarkBegin(b *testing.B) {
	b.Run("saturated", func(b *testing.B) { benchmarkBegin(b, 1200, 0) })
	b.Run("paced", func(b *testing.B) { benchmarkBegin(b, 4<<10, 250*time.Microsecond) })
}

func benchmarkBegin(b *testing.B, bodyLen int, every time.Duration) {
	j, _, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	body := bytes.Repeat([]byte("x"), bodyLen)
	var next atomic.Int64
	waits := make([]time.Duration, b.N)
	begin := func() {
		i := next.Add(1) - 1
		e := testEvent(int(i))
		t0 := time.Now()
		j.Begin(e, body)
		waits[i] = time.Since(t0)
		j.End(e.ID)
	}
	b.ResetTimer()
	if every > 0 {
		start := time.Now()
		for i := range b.N {
			time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
			begin()
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				begin()
			}
		})
	}
	b.StopTimer()
	slices.Sort(waits)
	for _, q := range []struct {
		name string
		at   int
	}{{"p50_µs", len(waits) / 2}, {"p99_µs", len(waits) * 99 / 100}, {"p999_µs", len(waits) * 999 / 1000}, {"max_µs", len(waits) - 1}} {
		b.ReportMetric(float64(waits[q.at].Microseconds()), q.name)
	}
}
