package meter

import (
	"log/slog"
	"testing"
	"time"
)

func TestTrimmable(t *testing.T) {
	for v, want := range map[string]bool{
		"2.9.10": false, "2.9.14": false, "2.9.15": true, "2.9.25": true, "2.10.0": true, "2.15.2": true,
		"3.0.0": true, "1.99.99": false, "2.10.0-beta.3": true, "2.9.14-RC.1": false, "": false, "2.10": false, "x.y.z": false,
	} {
		if got := trimmable(v); got != want {
			t.Errorf("trimmable(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestTrimFloor(t *testing.T) {
	for _, c := range []struct {
		ackFloor, delivered, last uint64
		want                      uint64
		refused                   bool
	}{
		{ackFloor: 10, delivered: 12, last: 20, want: 10},
		{ackFloor: 12, delivered: 12, last: 12, want: 12},
		{ackFloor: 13, delivered: 12, last: 20, refused: true}, // past what was delivered
		{ackFloor: 12, delivered: 12, last: 5, refused: true},  // the stream lost its tail
	} {
		got, err := trimFloor(c.ackFloor, c.delivered, c.last)
		if (err != nil) != c.refused || (!c.refused && got != c.want) {
			t.Errorf("trimFloor(%d, %d, %d) = %d, %v; want %d, refused %v", c.ackFloor, c.delivered, c.last, got, err, c.want, c.refused)
		}
	}
}

// TestTrimFailuresLogging (a cluster review): a trim refused once, 0.1 s
// after a paused node resumed with a stale view of the stream, was logged
// at ERROR that the stream had lost events, and nothing said when trims
// worked again. A run of failures is now a WARN at its first, an ERROR once
// it has lasted trimErrorAfter (then every trimLogEvery), and its end is
// logged.
func TestTrimFailuresLogging(t *testing.T) {
	var f trimFailures
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		at      time.Duration
		ok      bool // a trim that worked
		level   slog.Level
		logged  bool // the failure logged, or the end of a logged run
		comment string
	}
	for i, s := range []step{
		{at: 0, level: slog.LevelWarn, logged: true, comment: "the first failure"},
		{at: time.Second, comment: "the next, within trimErrorAfter"},
		{at: 2 * time.Second, ok: true, logged: true, comment: "works again: the end of a logged run"},
		{at: 3 * time.Second, ok: true, comment: "and again: nothing to say"},
		{at: 4 * time.Second, level: slog.LevelWarn, logged: true, comment: "a new run"},
		{at: 4*time.Second + trimErrorAfter, level: slog.LevelError, logged: true, comment: "lasted trimErrorAfter"},
		{at: 5*time.Second + trimErrorAfter, comment: "then quiet"},
		{at: 4*time.Second + trimErrorAfter + trimLogEvery, level: slog.LevelError, logged: true, comment: "every trimLogEvery"},
		{at: 5*time.Second + trimErrorAfter + trimLogEvery, comment: "then quiet again, not at every failure"},
		{at: 5*time.Second + trimErrorAfter + trimLogEvery, ok: true, logged: true, comment: "its end"},
	} {
		if s.ok {
			if got := f.ok(); got != s.logged {
				t.Errorf("step %d (%s): ok() = %v, want %v", i, s.comment, got, s.logged)
			}
			continue
		}
		level, logged := f.failed(t0.Add(s.at))
		if logged != s.logged || logged && level != s.level {
			t.Errorf("step %d (%s): failed() = %v, %v; want %v, %v", i, s.comment, level, logged, s.level, s.logged)
		}
	}
}
