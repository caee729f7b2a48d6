package journal

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestJournalWritesOnAFullDiskWithinItsReserve (a crash review): the
// spool and the journal share the data directory's disk. Once the spool
// (or anything else) had filled it, the journal's checkpoints failed, and
// a gateway killed then was recovered with what its requests had streamed
// before the disk filled (9 tokens billed of a stream the client had 364
// of). A segment's disk blocks are reserved up to the size at which it is
// compacted: begins and checkpoints are written on a full disk.
func TestJournalWritesOnAFullDiskWithinItsReserve(t *testing.T) {
	disk := metertest.SmallDisk(t, 32<<20)
	dir := filepath.Join(disk, "journal")
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	metertest.FillDisk(t, disk)
	body := []byte(`{"model":"sim-pro","messages":[{"role":"user","content":"hello"}]}`)
	output := strings.Repeat("streamed output ", 640) // 10 KiB a checkpoint
	const n = 50
	for i := range n {
		e := testEvent(i + 1)
		j.Begin(e, body)
		j.Checkpoint(e.ID, output, "", nil, false)
	}
	j.written(t)
	if err := j.Failing(); err != nil {
		t.Fatalf("the journal on a full disk: %v; want its records written within its reserve", err)
	}
	if err := j.Close(); err != nil { // kill -9: nothing ended
		t.Fatal(err)
	}
	_, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != n {
		t.Fatalf("recovered %d requests, want the %d begun on the full disk", len(reqs), n)
	}
	for _, r := range reqs {
		if r.Checkpoints != 1 || len(r.Output) != len(output) {
			t.Fatalf("request %s recovered with %d checkpoints and %d bytes of output, want 1 and %d",
				r.Event.ID, r.Checkpoints, len(r.Output), len(output))
		}
	}
}
