package usage_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLateIsAnHourAfterTheMonth: a row is late when recorded more than
// LateAfter (an hour) after the end of the UTC month it is dated in, in
// UTC whatever its zone: a stream begun at 23:59:59.9 on January 31 and
// stored at 00:00:03 is not (it was in flight at midnight), nor at
// 01:00:00; at 01:00:00.000001 it is; an event of February 1 is not.
func TestLateIsAnHourAfterTheMonth(t *testing.T) {
	began := time.Date(2026, 1, 31, 23, 59, 59, 900_000_000, time.UTC)
	midnight := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	eastern := time.FixedZone("UTC-5", -5*3600)
	for _, c := range []struct {
		at, recorded time.Time
		late         bool
	}{
		{began, midnight.Add(3 * time.Second), false},
		{began, midnight.Add(time.Hour), false},
		{began, midnight.Add(time.Hour + time.Microsecond), true},
		{began.In(eastern), midnight.Add(2 * time.Hour), true}, // the same instant written in UTC-5: January's
		{midnight, midnight.AddDate(0, 0, 27), false},
		{midnight.Add(-time.Nanosecond), midnight.AddDate(0, 0, 1), true},
	} {
		if got := usage.Late(c.at, c.recorded); got != c.late {
			t.Errorf("dated %s, recorded %s: late %v; want %v", c.at.Format(time.RFC3339Nano), c.recorded.Format(time.RFC3339Nano), got, c.late)
		}
	}
}
