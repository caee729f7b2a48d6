package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestJournalAfterADiskFull: the gateway's disk fills
// up for a moment. A request that ends then, whose final event the spool
// could not take either (same disk), is journaled with Fail, "kept in the
// crash journal for the next start"; the operator frees the disk; new
// requests are journaled as usual, and the process is then killed. The
// next start must find the failed final event and the requests in flight.
// (Found by a review: the failed write's records were dropped and its torn
// record hid every later one.)
func TestJournalAfterADiskFull(t *testing.T) {
	disk := metertest.SmallDisk(t, 256<<10)
	dir := filepath.Join(disk, "journal")
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	before := testEvent(1)
	j.Begin(before, body)
	j.written(t)

	// The disk fills up.
	filler := metertest.FillDisk(t, disk)
	// A request ends; NATS and the spool refused its final event, so the
	// gateway journals it with Fail.
	failed := testEvent(2)
	j.Begin(failed, bytes.Repeat([]byte("x"), 32<<10))
	final := *failed
	final.Usage = usage.Tokens{PromptTokens: 8000, CompletionTokens: 900}
	j.Fail(&final)
	time.Sleep(100 * time.Millisecond) // the write fails: its records wait for the next try
	j.mu.Lock()
	kept := len(j.buf)
	j.mu.Unlock()
	if kept == 0 {
		t.Fatal("the records of a write that failed were not kept for the next try")
	}

	// Space is freed; requests go on being journaled.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := testEvent(3)
	j.Begin(after, body)
	j.Checkpoint(after.ID, "streamed output", nil, false)
	j.written(t)
	// kill -9: nothing ends; what was written stays (Close only flushes
	// what is buffered, which is nothing now).
	werr := j.Close()
	t.Logf("the journal's writer error: %v", werr)

	_, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range reqs {
		got[r.Event.ID] = true
	}
	for _, want := range []struct {
		e    *usage.Event
		what string
	}{{before, "begun before the disk filled"}, {failed, "failed final event, journaled while the disk was full"}, {after, "begun after the disk was freed"}} {
		if !got[want.e.ID] {
			t.Errorf("request %s (%s) was not recovered", want.e.ID, want.what)
		}
	}
	if t.Failed() {
		t.Logf("recovered %d requests", len(reqs))
	}
}
