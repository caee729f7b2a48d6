package gateway

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// spendHolds holds the spend limits of keys (daily and monthly) and the
// credit of customers (prepaid balance plus credit limit) against the
// requests this gateway admits, between the ledger's counts of them.
//
// The ledger counts a key's spend as the meter commits, and publishes its
// state (usage.KeyState: its limits and its spend as of Version) when the
// key changes and as the spend passes half, three quarters and nine
// tenths of a limit, and the limit (a customer's as its credit left
// halves). Between two states a gateway once knew only blocked or not,
// and admitted every request sent together while the last charge had not
// yet crossed the limit (50 concurrent $0.01 streams on a $0.01 limit:
// $0.50). Now each request holds what it may cost (holdEstimate) from its
// admission until it ends; it then counts its charge until the next state
// arrives (spendHolds.arrived). A request is admitted while what is left,
// after the state's spend, the charges since and the holds of the requests
// in flight, is above 0: so a limit is overrun by at most the hold of the
// last request admitted and what requests cost beyond their holds, on
// each gateway. Gateways do not share holds or charges: each may spend
// what was left at the last state (docs/pricing-and-budgets.md).
type spendHolds struct {
	now       func() time.Time
	mu        sync.Mutex
	keys      countMap // by key id
	customers countMap // by customer id
	// changed counts the changes of charges; journaled is its value at
	// the last snapshot (spendholds_journal.go).
	changed, journaled uint64
}

// countMap holds spendCounts by key or customer id.
type countMap map[string]*spendCount

// spendCount is what one key, or one customer, has held and charged on
// this gateway since the state of Version, in nano-units of its currency
// (10^-9: a charge is counted rounded up to one, a micro-unit would
// count a 0.2 micro-unit embedding 5 times over).
type spendCount struct {
	version int64 // the state's Version the charges count from
	held    int64 // by the requests in flight
	open    int64 // the requests in flight
	// dayHeld and dayOpen, monthHeld and monthOpen: held and open of the
	// requests admitted in the UTC day day and month month, whose charges
	// count in them (a key's limits): a request begun before midnight
	// holds nothing of the new day's limit.
	dayHeld, dayOpen     int64
	monthHeld, monthOpen int64
	// charged is charged since version; dayCharged and monthCharged the
	// part of it in the UTC day day and month month (a key's limits).
	charged                  int64
	day, month               int64
	dayCharged, monthCharged int64
	// seeded says the charges are an earlier process's (spendHolds.seed),
	// counted from its version until this process has seen a state.
	seeded bool
}

func newSpendHolds() *spendHolds {
	return &spendHolds{now: time.Now, keys: map[string]*spendCount{}, customers: map[string]*spendCount{}}
}

// spendLimited reports whether k has a spend limit or a credit the
// gateway holds requests against.
func spendLimited(k *usage.KeyState) bool {
	return k != nil && (k.DailyLimitMicros != nil || k.MonthlyLimitMicros != nil || k.CreditLeftMicros != nil)
}

// utcDay and utcMonth number t's UTC day and month.
func utcDay(t time.Time) int64 { return t.Unix() / 86400 }
func utcMonth(t time.Time) int64 {
	y, m, _ := t.UTC().Date()
	return int64(y)*12 + int64(m)
}

// count returns the spendCount of id in m, made when new, its charges
// counted from version and rolled to the day and month of now (spendHolds.mu
// held).
func (m countMap) count(id string, version int64, now time.Time) *spendCount {
	c := m[id]
	if c == nil {
		c = &spendCount{}
		m[id] = c
	}
	switch {
	case version > c.version: // a newer state counts what came before it
		c.version, c.charged, c.dayCharged, c.monthCharged = version, 0, 0, 0
	case c.seeded && version < c.version:
		// An earlier process's charges, counted from a state newer than
		// this one (a key bucket rebuilt): the state does not hold them
		// either, and they are not a reason to refuse it as stale.
		c.version = version
	}
	c.seeded = false
	c.roll(now)
	return c
}

// arrived returns the function a StateWatcher calls as a newer state of a
// key or customer of m, one of h's counts, is applied: from then on, the
// count's charges are those the state does not hold. Left to the next
// hold, the reset threw away the charges of the requests that ended in
// between (a review: 16 of 40 admitted past a limit whose state had come
// while 8 slow streams ran, 15-23% over it).
func (h *spendHolds) arrived(m countMap) func(id string, version int64) {
	return func(id string, version int64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c := m[id]; c != nil && version > c.version {
			c.version, c.charged, c.dayCharged, c.monthCharged = version, 0, 0, 0
			h.changed++
		}
	}
}

// roll moves c's day and month on to those of now, their holds and
// charges to 0 when they change. It never moves them back: a day or month
// after now's was counted before the gateway's clock was set back, and
// now is taken as in it until the clock passes it again, as the limiter
// keeps the seconds counted before a step back (keyCounts.rebase). Rolled
// back, a key whose daily limit was held whole at 00:00:30 got an empty
// day when the clock stepped back to 23:59:50 (the state's spend, of
// another day, not counted), and another once it passed midnight again
// (its holds and charges of the day forgotten). A step back refuses
// early, never late.
func (c *spendCount) roll(now time.Time) {
	if d := utcDay(now); d > c.day {
		c.day, c.dayCharged, c.dayHeld, c.dayOpen = d, 0, 0, 0
	}
	if mo := utcMonth(now); mo > c.month {
		c.month, c.monthCharged, c.monthHeld, c.monthOpen = mo, 0, 0, 0
	}
}

// spendRefusal is why a request may not spend now: exhausted (402, and
// until when, if the limit resets), or held (429: the requests in flight
// hold what is left; retry when they end).
type spendRefusal struct {
	held    bool
	message string
	until   time.Time // zero: no reset
}

// staleState is hold's answer for a key state older than the one its
// count is at: read before a newer state arrived (and reset the count to
// it), its spend would be counted without the charges made between the
// two (a review: requests whose bodies came 35 ms after their headers,
// as a state arrived, spent 1.6 times their key's limit). The caller reads
// the key again: the cache holds the newer state before the count is
// reset.
var staleState = &spendRefusal{held: true, message: "this API key's state changed while the request was admitted; retry"}

// hold admits a request of key k that may cost est nano-units, holding
// est against k's limits and its customer's credit until release is
// called with the request's charge (nano-units; 0 when it was not charged)
// and its start, whose UTC day and month it counts in (as the ledger
// does); or refuses it (when several limits do, with the one that lasts:
// lasts), or answers staleState for a k older than its count. A key
// without spend limits or credit is admitted with a release that does
// nothing; a second call of release does nothing either.
func (h *spendHolds) hold(k *usage.KeyState, est int64) (release func(charge int64, at time.Time), no *spendRefusal) {
	if !spendLimited(k) {
		return func(int64, time.Time) {}, nil
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var kc, cc *spendCount
	if k.DailyLimitMicros != nil || k.MonthlyLimitMicros != nil {
		if kc = h.keys.count(k.KeyID, k.Version, now); k.Version < kc.version {
			return nil, staleState
		}
	}
	if k.CreditLeftMicros != nil {
		if cc = h.customers.count(k.CustomerID, k.CustomerVersion, now); k.CustomerVersion < cc.version {
			return nil, staleState
		}
	}
	var refused *spendRefusal // the one that lasts (lasts), of those below
	if kc != nil {
		vt := time.Unix(0, k.Version)
		// The limits reset after the count's day and month, which a clock
		// set back is still in (roll). The state's spend counts when it is
		// of either's period: a clock that ran ahead past midnight and was
		// set back has the count in a day to come, and the state, of
		// today, still holds today's spend.
		at := now
		if d := time.Unix(kc.day*86400, 0); d.After(now) {
			at = d
		}
		for _, l := range [...]struct {
			limit      *int64
			spent      int64 // in the state, of its day or month
			charged    int64 // since, today or this month
			held, open int64 // by the requests in flight begun today or this month
			samePeriod bool  // the state's day or month is the count's, or the clock's
			what       string
			until      time.Time
		}{
			{k.DailyLimitMicros, nanos(k.DaySpentMicros), kc.dayCharged, kc.dayHeld, kc.dayOpen, utcDay(vt) == kc.day || utcDay(vt) == utcDay(now), "daily spend limit", nextDay(at)},
			{k.MonthlyLimitMicros, nanos(k.MonthSpentMicros), kc.monthCharged, kc.monthHeld, kc.monthOpen, utcMonth(vt) == kc.month || utcMonth(vt) == utcMonth(now), "monthly spend limit", nextMonth(at)},
		} {
			if l.limit == nil {
				continue
			}
			spent := l.charged
			if l.samePeriod {
				spent += l.spent
			}
			refused = lasts(refused, refusalAt(nanos(*l.limit)-spent, l.held, l.open, l.what, l.until))
		}
	}
	if cc != nil {
		refused = lasts(refused, refusalAt(nanos(*k.CreditLeftMicros)-cc.charged, cc.held, cc.open, "", time.Time{}))
	}
	if refused != nil {
		return nil, refused
	}
	// The day and month each count holds the request in: the count's
	// own, rolled to now's (roll), not moved back by a clock set back.
	counts := [2]*spendCount{kc, cc}
	var days, months [2]int64
	for i, c := range counts {
		if c != nil {
			days[i], months[i] = c.day, c.month
			c.held += est
			c.open++
			c.dayHeld, c.dayOpen = c.dayHeld+est, c.dayOpen+1
			c.monthHeld, c.monthOpen = c.monthHeld+est, c.monthOpen+1
		}
	}
	var once sync.Once
	return func(charge int64, at time.Time) {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			now := h.now()
			for i, c := range counts {
				if c == nil {
					continue
				}
				c.held -= est
				c.open--
				c.roll(now)
				if days[i] == c.day {
					c.dayHeld, c.dayOpen = c.dayHeld-est, c.dayOpen-1
				}
				if months[i] == c.month {
					c.monthHeld, c.monthOpen = c.monthHeld-est, c.monthOpen-1
				}
				c.charged += charge
				if charge != 0 {
					h.changed++
				}
				// Charged in the day and month it began in, as the ledger
				// counts it; begun before the count's while the clock is
				// still behind it (set back: roll), in the count's, so
				// that a step back refuses early, never late.
				if d := utcDay(at); d == c.day || d < c.day && utcDay(now) < c.day {
					c.dayCharged += charge
				}
				if mo := utcMonth(at); mo == c.month || mo < c.month && utcMonth(now) < c.month {
					c.monthCharged += charge
				}
			}
		})
	}, nil
}

// nanos is micro-units m in nano-units, bounded so that sums of a few
// stay within an int64.
func nanos(m int64) int64 {
	const bound = 1 << 58
	return max(min(m, bound/1000), -bound/1000) * 1000
}

// refusalAt is the refusal of a request when what is left of a limit
// after the holds of the requests in flight is 0 or less: left is what is
// left before those holds (nano-units), held what they hold, open how
// many they are; what names a key's limit (that resets at until), "" the
// customer's credit. When only the holds use up what is left, the
// refusal is held: it may pass once they end.
func refusalAt(left, held, open int64, what string, until time.Time) *spendRefusal {
	switch {
	case left-held > 0:
		return nil
	case left > 0 && what == "":
		return &spendRefusal{held: true, message: "the rest of the account's prepaid balance and credit limit is held by its " +
			strconv.FormatInt(open, 10) + " requests in flight; retry when they end"}
	case left > 0:
		return &spendRefusal{held: true, message: "the rest of this API key's " + what + " is held by its " +
			strconv.FormatInt(open, 10) + " requests in flight; retry when they end"}
	case what == "":
		return &spendRefusal{message: "the account's prepaid balance and credit limit are exhausted; add credit to continue"}
	}
	return &spendRefusal{message: "this API key has reached its " + what, until: until}
}

// lasts is the one of two refusals (either may be nil) that refuses
// longer, so that a request several limits refuse is told of the last to
// lift: a spent limit over a held one (the requests in flight may end in a
// second), the customer's credit (lifted by a top-up only) over a key's
// limit, and of two key limits the one that resets later (the monthly, as
// the ledger's key state names it when both are spent).
func lasts(a, b *spendRefusal) *spendRefusal {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.held != b.held:
		if a.held {
			return b
		}
		return a
	case a.held:
		return a
	case a.until.IsZero():
		return a
	case b.until.IsZero() || b.until.After(a.until):
		return b
	}
	return a
}

func nextDay(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}

func nextMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// refuseSpend answers a spendRefusal in env: 429 with Retry-After 1 when
// the requests in flight hold what is left, else 402 insufficient_quota,
// with Retry-After and the reset time when the limit resets.
func refuseSpend(w http.ResponseWriter, env provider.Envelope, no *spendRefusal, now time.Time) {
	if no.held {
		w.Header().Set("Retry-After", "1")
		env.WriteError(w, provider.Err(http.StatusTooManyRequests, "insufficient_quota", "spend_held", no.message))
		return
	}
	msg := no.message
	if !no.until.IsZero() {
		wait := no.until.Sub(now)
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		msg += "; it resets at " + no.until.Format(time.RFC3339)
	}
	env.WriteError(w, provider.Err(http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota", msg))
}
