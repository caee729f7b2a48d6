package journal

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestJournalKeepsSpendCharges: the spend charges a gateway journals
// survive compaction and a restart, the last one standing, as given; and
// one that is not JSON is not journaled.
func TestJournalKeepsSpendCharges(t *testing.T) {
	j, dir := openWithSegments(t, 32<<10)
	if j.RecoveredSpendCharges() != nil {
		t.Fatal("charges from nowhere")
	}
	j.SpendCharges([]byte(`{"keys":{"k1":{"v":1,"c":5}}}`))
	last := `{"keys":{"k1":{"v":1,"c":9}},"customers":{"c1":{"v":2,"c":9}}}`
	j.SpendCharges([]byte(last))
	j.SpendCharges([]byte(`{"keys":`)) // torn: not journaled
	j.churn(2000)                      // several compactions
	j.written(t)
	j.Close()
	j2, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(j2.RecoveredSpendCharges()); got != last {
		t.Fatalf("recovered %q, want %q", got, last)
	}
	// The next process's journal keeps them too, until it journals its
	// own: also when it stops (or dies) right after the older segments'
	// release, before any compaction or snapshot of its own.
	j2.Release()
	j2.Close()
	j3, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j3.Close()
	if got := string(j3.RecoveredSpendCharges()); got != last {
		t.Fatalf("after a restart and the older segments' release: recovered %q, want %q", got, last)
	}
}

// TestJournalKeepsSpendChargesThroughAnEarlyRelease: the spend charges an
// earlier process left are still recovered after a process that opened
// the journal and released the older segments (its recovery done) stops
// before journaling its own: a gateway killed in its first 5 seconds, or
// a crash loop, forgot them (a review: a key spent before a restart served
// again after a kill -9 right after the next start), and so did the hidden
// reasoning averages.
func TestJournalKeepsSpendChargesThroughAnEarlyRelease(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	charges := `{"keys":{"k1":{"version":1,"charged":9}}}`
	j.SpendCharges([]byte(charges))
	j.HiddenReasoning(map[string]int64{"o3": 250})
	j.written(t)
	j.Close()
	for restart := range 3 {
		j, _, err = Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, hidden := string(j.RecoveredSpendCharges()), j.RecoveredHiddenReasoning()
		if err := j.Release(); err != nil {
			t.Fatal(err)
		}
		j.Close() // nothing journaled since the start
		if got != charges || hidden["o3"] != 250 {
			t.Fatalf("start %d after the charges: recovered %q and hidden reasoning %v; want %q and o3 250", restart+1, got, hidden, charges)
		}
	}
}

// TestJournalKeepsALargeSpendSnapshot: a snapshot of the charges of
// 30,000 keys (4.8 MB) is recovered whole, at the next start and the one
// after, through a compaction. Written as one record, longer than a
// record may be (maxRecord, 2.3 MiB: about 15,000 keys), it was read back
// as corrupt: no charges recovered, a warning of a corrupt record at each
// start, and the segment kept aside as damaged.
func TestJournalKeepsALargeSpendSnapshot(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"keys":{`)
	for i := range 30_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"key_%024d":{"version":1796392800000000001,"charged":123456789,"day":20791,"day_charged":123456789,"month":24324,"month_charged":123456789}`, i)
	}
	b.WriteString(`}}`)
	big := b.String()
	j, dir := openWithSegments(t, 1<<20)
	j.SpendCharges([]byte(`{"keys":{"k1":{"version":1,"charged":9}}}`))
	j.SpendCharges([]byte(big))
	j.churn(3000) // several compactions
	j.written(t)
	j.Close()
	for start := range 2 {
		j, _, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := j.RecoveredSpendCharges()
		if err := j.Release(); err != nil {
			t.Fatal(err)
		}
		j.Close()
		if string(got) != big {
			t.Fatalf("start %d: recovered %d bytes of charges (%.40q); want the %d of the last snapshot", start+1, len(got), got, len(big))
		}
		aside, _ := filepath.Glob(filepath.Join(dir, "*"+damagedSuffix+"*"))
		if len(aside) > 0 {
			t.Fatalf("start %d: segments kept aside as damaged: %v", start+1, aside)
		}
	}
}
