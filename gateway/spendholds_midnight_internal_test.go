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
