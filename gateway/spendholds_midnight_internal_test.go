package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpendHoldsOfYesterdayDoNotHoldToday: a request admitted before
// midnight is charged to the day it began (as the ledger counts it), so
// after midnight what it holds is no longer held against the new day's
// limit: a key whose daily limit was held whole by a stream begun at
// 23:59:50 was refused 429 spend_held all the new day's first minutes,
// though the 402 it got before told it the limit "resets at 00:00Z" and
// nothing of the new day was spent. Its hold still counts against the
// month's limit, whose period it is in.
func TestSpendHoldsOfYesterdayDoNotHoldToday(t *testing.T) {
	now := time.Date(2026, 12, 4, 23, 59, 50, 0, time.UTC)
	h := holdsAt(&now)
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)),
		MonthlyLimitMicros: new(int64(1500)), Version: now.Add(-time.Hour).UnixNano()}
	long := admitted(t, h, k, 1, 1000) // holds the whole daily limit
	now = now.Add(20 * time.Second)    // 00:00:10, the stream still running
	release, no := h.hold(k, 100_000)
	if no != nil {
		t.Fatalf("a request of the new day, none of its limit spent or held: %+v; want admitted", no)
	}
	release(0, now)
	// The month's limit still holds yesterday's request: with 600 more
	// held today, 1,600 of the month's 1,500 are held (600 of the day's
	// 1,000).
	today := admitted(t, h, k, 1, 600)
	if _, no := h.hold(k, 100_000); no == nil || !no.held || !strings.Contains(no.message, "monthly spend limit") {
		t.Fatalf("the month's 1,500 held by 1,600 in flight: %+v; want held by the monthly limit", no)
	}
	today[0](0)
	long[0](1000) // charged to Dec 4 (began at 23:59:50): the new day's limit is untouched
	for _, r := range admitted(t, h, k, 1, 400) {
		r(0)
	}
}

// TestSpendHoldsOutliveAClockSetBackAcrossMidnight: a key's holds and
// charges are counted in its gateway's UTC day and month. A clock set back
// across midnight (an NTP step, a clock corrected) rolled them back to the
// day before, emptied, and then forward again, emptied once more: a key
// whose daily limit was held whole at 00:00:30 by two requests in flight
// was admitted again as the clock showed 23:59:50 (yesterday's limit,
// nothing of it held, the state's spend taken for another day's), and
// again once the clock was back past midnight (today's holds and charges
// forgotten). Counts of a later day or month than the clock's stay
// where they are, as the limiter's minute keeps the seconds counted
// before a step back (keyCounts.rebase).
func TestSpendHoldsOutliveAClockSetBackAcrossMidnight(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 30, 0, time.UTC)
	h := holdsAt(&now)
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)),
		MonthlyLimitMicros: new(int64(1500)), DaySpentMicros: 100, MonthSpentMicros: 100,
		Version: now.Add(-10 * time.Second).UnixNano()}
	inFlight := admitted(t, h, k, 2, 450) // with the state's 100, the day's 1,000 held whole
	if _, no := h.hold(k, 1000); no == nil || !no.held {
		t.Fatalf("the day's limit held whole: %+v; want held", no)
	}
	for _, back := range []time.Duration{20 * time.Second, 40 * time.Second} { // 00:00:10, then 23:59:50 on Dec 31
		now = time.Date(2027, 1, 1, 0, 0, 30, 0, time.UTC).Add(-back)
		if _, no := h.hold(k, 1000); no == nil || !no.held {
			t.Fatalf("clock set back to %s, the day's limit held whole since 00:00:30: %+v; want held",
				now.Format(time.TimeOnly), no)
		}
	}
	inFlight[0](450) // charged today (begun at 00:00:30), the clock still back
	if _, no := h.hold(k, 1000); no == nil || !no.held {
		t.Fatalf("clock set back, 550 of the day's 1,000 spent and 450 held: %+v; want held", no)
	}
	now = time.Date(2027, 1, 1, 0, 0, 45, 0, time.UTC) // the clock past the step again
	if _, no := h.hold(k, 1000); no == nil || !no.held {
		t.Fatalf("clock back past 00:00:30, 550 of the day's 1,000 spent and 450 held: %+v; want held", no)
	}
	inFlight[1](450)
	for _, at := range []time.Time{now, time.Date(2026, 12, 31, 23, 59, 55, 0, time.UTC)} { // and set back again
		now = at
		_, no := h.hold(k, 1000)
		if no == nil || no.held || !strings.Contains(no.message, "daily spend limit") ||
			!no.until.Equal(time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("at %s, the day's 1,000 spent: %+v; want the daily limit reached until 2027-01-02", at.Format(time.DateTime), no)
		}
	}
}

// TestSpendHoldsOfAClockThatRanAheadCountTheState: a clock that ran ahead
// past midnight and was set back leaves a key's count in the day to come
// (roll does not move it back): the state of today, read as the clock
// comes back, still counts its spend against the daily limit.
func TestSpendHoldsOfAClockThatRanAheadCountTheState(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 5, 0, time.UTC) // 10 minutes ahead
	h := holdsAt(&now)
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)),
		Version: time.Date(2026, 12, 4, 23, 40, 0, 0, time.UTC).UnixNano()}
	admitted(t, h, k, 1, 100)[0](0)
	now = time.Date(2026, 12, 4, 23, 50, 10, 0, time.UTC) // set right
	k = &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)), DaySpentMicros: 1000,
		Version: now.UnixNano()}
	if _, no := h.hold(k, 1000); no == nil || no.held || !strings.Contains(no.message, "daily spend limit") {
		t.Fatalf("the day's 1,000 spent: %+v; want the daily limit reached", no)
	}
}

// TestChargesWhileTheClockIsBackCount: after the clock is set back across
// midnight, the counts stay in the later day (above), but a request begun
// while the clock showed the day before was charged to no day: its start
// was not the count's day. A review: a 10 s step back at 00:00:05
// admitted 50 requests of 300 on a limit of 1,000, and 3 more once the
// clock passed midnight again, those 50 forgotten. Begun before the
// count's day while the clock is still behind it, a request is charged in
// the count's day: refused early, never late.
func TestChargesWhileTheClockIsBackCount(t *testing.T) {
	step := time.Date(2027, 1, 1, 0, 0, 5, 0, time.UTC)
	now := step
	h := holdsAt(&now)
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)), Version: step.Add(-time.Hour).UnixNano()}
	admitted(t, h, k, 1, 1)[0](0) // the count is in Jan 1
	now = step.Add(-10 * time.Second)
	served := 0
	for ; served < 50; served++ {
		release, no := h.hold(k, 300_000)
		if no != nil {
			break
		}
		release(300_000, now)
	}
	if served > 4 {
		t.Fatalf("clock set back to %s: %d requests of 300 served on a daily limit of 1,000; want at most 4", now.Format(time.TimeOnly), served)
	}
	now = step.Add(time.Second) // past the step again
	if _, no := h.hold(k, 300_000); no == nil {
		t.Fatalf("after %d of 300 charged while the clock was back, the clock past midnight again: admitted; want refused", served)
	}
}
