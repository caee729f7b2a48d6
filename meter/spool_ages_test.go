package meter

import (
	"testing"
	"time"
)

// TestSpoolAgesThroughALongBacklog: the oldest event left is timed to its
// second through a backlog published piece by piece, across the marks'
// compaction, and appends within a second share a mark.
func TestSpoolAgesThroughALongBacklog(t *testing.T) {
	var a spoolAges
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for i := range 200 { // an event a second, and two more within each second
		a.appended(1, t0.Add(time.Duration(i)*time.Second))
		a.appended(2, t0.Add(time.Duration(i)*time.Second+500*time.Millisecond))
	}
	if len(a.marks) != 200 {
		t.Fatalf("%d marks for 200 seconds of appends", len(a.marks))
	}
	for _, step := range []struct {
		published int64
		want      time.Time
	}{
		{2, t0}, {1, t0.Add(time.Second)}, {3 * 149, t0.Add(150 * time.Second)}, {2, t0.Add(150 * time.Second)},
		{1, t0.Add(151 * time.Second)}, {3*49 - 1, t0.Add(199 * time.Second)}, {1, time.Time{}},
	} {
		a.published(step.published)
		if got := a.oldest(); !got.Equal(step.want) {
			t.Fatalf("after %d more published (%d of %d): the oldest left at %v, want %v", step.published, a.out, a.in, got, step.want)
		}
	}
	a.appended(1, t0.Add(time.Hour))
	if got := a.oldest(); !got.Equal(t0.Add(time.Hour)) || a.in != 1 {
		t.Errorf("an append once empty: the oldest at %v (in %d), want %v", got, a.in, t0.Add(time.Hour))
	}
}
