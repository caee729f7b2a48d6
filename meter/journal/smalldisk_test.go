package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestJournalOnADiskSmallerThanASegment (a crash review): on a data
// directory smaller than one segment (maxSegment, 8 MiB; a 4 MiB tmpfs
// here), compaction never ran, since it ran only once a segment held
// maxSegment: the segment's records of requests long ended filled the
// disk, its writes failed ("no space left on device"), and the gateway
// refused every request (503 metering_unavailable) for good, freed disk or
// not. Requests of three times the disk's size go through it here, with
// the disk filled by another file and freed part-way; the journal must
// serve them all (failing only while that file fills the disk), and a
// kill -9 after must still recover every request left open, with its
// checkpoints.
func TestJournalOnADiskSmallerThanASegment(t *testing.T) {
	for _, size := range []int64{4 << 20, 6 << 20} { // 512 and 768 KiB segments
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) { journalOnASmallDisk(t, size) })
	}
}

func journalOnASmallDisk(t *testing.T, size int64) {
	disk := metertest.SmallDisk(t, int(size))
	dir := filepath.Join(disk, "journal")
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("b"), 16<<10)
	output := "streamed output, one checkpoint of it"
	// open are the requests left open (in flight at the kill), by id:
	// one every 64 requests, the others end.
	open := map[string]bool{}
	var traffic int64
	refused := 0 // begins refused while the journal failed, and served on a retry
	// serve journals request i as the gateway does, and fails the test if
	// the journal refuses it and does not recover within 5 s (the gateway
	// answers 503 meanwhile).
	serve := func(i int) {
		t.Helper()
		e := testEvent(i)
		j.Begin(e, body)
		if err := j.Failing(); err != nil {
			refused++
			j.End(e.ID) // refused, 503: not sent upstream
			deadline := time.Now().Add(5 * time.Second)
			for j.Failing() != nil && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if err := j.Failing(); err != nil {
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					if fi, err := e.Info(); err == nil {
						t.Logf("%s: %d bytes", e.Name(), fi.Size())
					}
				}
				t.Fatalf("request %d, after %d KiB of requests through a %d KiB disk: the journal still fails 5 s on, "+
					"with nothing but its own segment on the disk: %v", i, traffic>>10, size>>10, err)
			}
			j.Begin(e, body) // the gateway refused it; its client tries again
		}
		traffic += int64(len(body))
		j.Checkpoint(e.ID, output, "", &usage.Tokens{PromptTokens: 4000, CompletionTokens: 9}, false)
		if i%64 == 0 {
			open[e.ID] = true
			return
		}
		j.End(e.ID)
	}
	i := 0
	for ; traffic < 3*size/2; i++ {
		serve(i + 1)
	}
	// The disk fills with another file (a spool, an upload): the journal
	// writes within its segment's reserve, then fails.
	filler := metertest.FillDisk(t, disk)
	for k := 0; k < 64 && j.Failing() == nil; k++ {
		i++
		e := testEvent(i)
		j.Begin(e, body)
		j.End(e.ID) // served, or refused (503) if its begin failed
	}
	// The operator frees it; requests go on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for traffic < 3*size {
		i++
		serve(i)
	}
	j.written(t)
	if err := j.Failing(); err != nil {
		t.Fatalf("the journal fails after the requests: %v", err)
	}
	// kill -9: what is written stays; Close writes what is buffered, and
	// nothing is.
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range reqs {
		if !open[r.Event.ID] {
			t.Errorf("request %s recovered, but it ended before the kill", r.Event.ID)
			continue
		}
		if r.Checkpoints == 0 || string(r.Output) != output {
			t.Errorf("request %s recovered with %d checkpoints and output %q, want its checkpoint", r.Event.ID, r.Checkpoints, r.Output)
		}
		got[r.Event.ID] = true
	}
	for id := range open {
		if !got[id] {
			t.Errorf("request %s, open at the kill, was not recovered", id)
		}
	}
	t.Logf("%d requests, %d KiB of bodies through a %d KiB disk (%d refused once, then served); %d open at the kill, %d recovered",
		i, traffic>>10, size>>10, refused, len(open), len(reqs))
}

// TestJournalErrorsNameTheSegment: once compacted, the journal's writes
// went to a file opened as <segment>.compacting and renamed, and their
// errors named that file, which no longer exists ("write
// …/00000000000000000002-….journal.compacting: no space left on device",
// on /readyz and in the log): an operator looking for it found nothing.
// They name the segment.
func TestJournalErrorsNameTheSegment(t *testing.T) {
	disk := metertest.SmallDisk(t, 512<<10)
	dir := filepath.Join(disk, "journal")
	withSegments(t, 16<<10)
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 8 { // 32 KiB, ended: compacted once at least
		e := testEvent(i + 1)
		j.Begin(e, bytes.Repeat([]byte("b"), 4<<10))
		j.End(e.ID)
	}
	j.written(t)
	j.fmu.Lock()
	n := j.segNum
	j.fmu.Unlock()
	if n == 1 {
		t.Fatal("the journal did not compact")
	}
	filler := metertest.FillDisk(t, disk)
	defer os.Remove(filler) // before Close, which writes what waits
	j.Begin(testEvent(9), bytes.Repeat([]byte("f"), 64<<10))
	ferr := j.Failing()
	if ferr == nil {
		t.Fatal("a 64 KiB begin on a full disk was written")
	}
	// The failed write has the writer compact at once, so the error may be
	// a later write's, in the segment after n (.ci/run under -race).
	j.fmu.Lock()
	last := j.segNum
	j.fmu.Unlock()
	named := false
	for m := n; m <= last; m++ {
		named = named || strings.Contains(ferr.Error(), segPath(dir, m, j.seed))
	}
	if strings.Contains(ferr.Error(), compactingSuffix) || !named {
		t.Fatalf("the write error on a full disk: %v; want it to name a segment, %s to %s", ferr, segPath(dir, n, j.seed), segPath(dir, last, j.seed))
	}
}
