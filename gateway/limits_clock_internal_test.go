package gateway

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLimitsOutliveAClockSetBack: a key's minute is counted by its
// gateway's wall clock. Set back (an NTP step, a clock corrected), the
// seconds counted before it were ahead of every new second, and counted
// in the minute until the clock came back to them: a key at its
// rpm_limit when the clock went back an hour was refused for the hour,
// each 429 saying to retry in 60 s. Now a minute after the step, the
// minute admits again, and a step under a minute still counts the
// requests of the minute.
func TestLimitsOutliveAClockSetBack(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	l := newLimiter(nil)
	l.now = func() time.Time { return now }
	for _, back := range []time.Duration{time.Hour, 10 * time.Minute, 2 * time.Minute} {
		k := &usage.KeyState{KeyID: "k" + back.String(), RPMLimit: 2}
		now = t0
		for range 2 {
			if _, over := l.admit(k, 0); over != nil {
				t.Fatal(over)
			}
		}
		now = t0.Add(-back) // set back
		if _, over := l.admit(k, 0); over == nil {
			t.Errorf("set back %s at once: admitted; want the minute's 2 requests still counted", back)
		}
		now = t0.Add(-back + 61*time.Second) // a minute after the step
		release, over := l.admit(k, 0)
		if over != nil {
			t.Errorf("set back %s, a minute later: refused (%s, retry after %s); want admitted", back, over.message, over.retryAfter)
			continue
		}
		release()
	}
	// A step of seconds: the minute's requests still count until it has
	// passed.
	k := &usage.KeyState{KeyID: "s", RPMLimit: 2}
	now = t0
	for range 2 {
		if _, over := l.admit(k, 0); over != nil {
			t.Fatal(over)
		}
	}
	now = t0.Add(-5 * time.Second)
	if _, over := l.admit(k, 0); over == nil {
		t.Error("set back 5 s: admitted; want the minute's 2 requests counted")
	}
	now = t0.Add(-5*time.Second + 30*time.Second)
	if _, over := l.admit(k, 0); over == nil {
		t.Error("set back 5 s, 30 s later: admitted; want the minute's 2 requests counted")
	}
}
