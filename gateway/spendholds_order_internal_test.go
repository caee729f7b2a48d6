package gateway

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpendHoldsNameTheRefusalThatLasts: when more than one of a key's
// limits, or its customer's credit, refuses a request, the refusal is the
// one that lasts: a spent limit over one only held by requests in flight
// (which a retry in a second would meet again), the monthly limit over the
// daily (as the ledger's state names it), and the customer's credit, which
// no reset lifts, over both (as the key cache folds it in). The gateway
// checked the daily limit first and answered with it: 429 spend_held
// (retry in 1 s) while the month was spent, or "resets at midnight" for a
// key whose month, or whose customer's credit, would still refuse it then.
func TestSpendHoldsNameTheRefusalThatLasts(t *testing.T) {
	now := time.Date(2026, 12, 10, 15, 0, 0, 0, time.UTC)
	v := now.Add(-time.Minute).UnixNano()
	nextMonth := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

	// Both limits spent by this gateway's charges: the monthly one, which
	// resets last.
	h := holdsAt(&now)
	both := &usage.KeyState{KeyID: "both", CustomerID: "c1", DailyLimitMicros: new(int64(1000)), DaySpentMicros: 900,
		MonthlyLimitMicros: new(int64(1000)), MonthSpentMicros: 900, Version: v}
	admitted(t, h, both, 1, 50)[0](200)
	if _, no := h.hold(both, 1000); no == nil || no.held || !no.until.Equal(nextMonth) || no.message != "this API key has reached its monthly spend limit" {
		t.Errorf("daily and monthly limits spent: %+v; want the monthly limit, until %s", no, nextMonth)
	}

	// The daily limit held by a request in flight, the monthly one spent:
	// spent, not held.
	held := &usage.KeyState{KeyID: "held", CustomerID: "c2", DailyLimitMicros: new(int64(1000)),
		MonthlyLimitMicros: new(int64(1000)), MonthSpentMicros: 900, Version: v}
	first := admitted(t, h, held, 1, 50)
	admitted(t, h, held, 1, 900) // still in flight
	first[0](150)
	if _, no := h.hold(held, 1000); no == nil || no.held || !no.until.Equal(nextMonth) {
		t.Errorf("daily limit held, monthly limit spent: %+v; want the monthly limit spent, until %s", no, nextMonth)
	}

	// The daily limit and the customer's credit spent: the credit, which
	// only a top-up lifts.
	credit := &usage.KeyState{KeyID: "credit", CustomerID: "c3", DailyLimitMicros: new(int64(100)),
		CreditLeftMicros: new(int64(100)), CustomerVersion: v, Version: v}
	admitted(t, h, credit, 1, 50)[0](200)
	if _, no := h.hold(credit, 1000); no == nil || no.held || !no.until.IsZero() ||
		no.message != "the account's prepaid balance and credit limit are exhausted; add credit to continue" {
		t.Errorf("daily limit and credit spent: %+v; want the credit, with no reset", no)
	}
}
