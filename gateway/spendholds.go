package gateway

import (
	"math/big"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// maxHoldOutputTokens bounds the output a request is held for: a
// max_tokens past any model's output (1<<40, say) would overflow its
// rating, which then could not be held at all.
const maxHoldOutputTokens = 1_000_000

// defaultHoldOutputTokens is the output a request that sets no output limit
// (max_tokens, max_completion_tokens, max_output_tokens,
// generationConfig.maxOutputTokens) is held for against a spend limit:
// the max_tokens Tollgate sends Anthropic for such a request
// (anthropic.DefaultMaxTokens).
const defaultHoldOutputTokens = 4096

// spendHolds holds the spend limits of keys (daily and monthly) and the
// credit of customers (prepaid balance plus credit limit) against the
// requests this gateway admits, between the ledger's counts of them.
//
// The ledger counts a key's spend as the meter commits, and publishes its
// state (usage.KeyState: its limits and its spend as of Version) when the
// spend crosses a limit or the key changes; between two states, a gateway
// knew only blocked or not, and admitted every request sent together
// while the last charge had not yet crossed the limit (50 concurrent
// $0.01 streams on a $0.01 limit: $0.50). Now each request holds what it
// may cost (its prompt's estimate and its output limit, rated as the
// ledger will) from its admission until it ends; it then counts its
// charge until the next state. A request is admitted while what is left,
// after the state's spend, the charges since and the holds of the
// requests in flight, is above 0: so a limit is overrun by at most what
// the requests admitted last cost beyond their holds, on each gateway.
// Gateways do not share holds or charges: N gateways may each spend what
// is left (docs/pricing-and-budgets.md).
type spendHolds struct {
	now       func() time.Time
	mu        sync.Mutex
	keys      countMap // by key id
	customers countMap // by customer id
}

// countMap holds spendCounts by key or customer id.
type countMap map[string]*spendCount

// spendCount is what one key, or one customer, has held and charged on
// this gateway since the state of Version, in micro-units of its
// currency.
type spendCount struct {
	version int64 // the state's Version the charges count from
	held    int64 // by the requests in flight
	open    int64 // the requests in flight
	// charged is charged since version; dayCharged and monthCharged the
	// part of it in the UTC day and month day and month (a key's limits).
	charged                  int64
	day, month               int64
	dayCharged, monthCharged int64
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
	if version > c.version { // a newer state counts what came before it
		c.version, c.charged, c.dayCharged, c.monthCharged = version, 0, 0, 0
	}
	c.roll(now)
	return c
}

// roll moves c's day and month to those of now, their charges to 0 when
// they change.
func (c *spendCount) roll(now time.Time) {
	if d := utcDay(now); c.day != d {
		c.day, c.dayCharged = d, 0
	}
	if mo := utcMonth(now); c.month != mo {
		c.month, c.monthCharged = mo, 0
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

// hold admits a request of key k that may cost est micro-units,
// holding est against k's limits and its customer's credit until release
// is called with the request's charge (micro-units; 0 when it was not
// charged); or refuses it. A key without spend limits or credit is
// admitted with a release that does nothing.
func (h *spendHolds) hold(k *usage.KeyState, est int64) (release func(charge int64), no *spendRefusal) {
	if !spendLimited(k) {
		return func(int64) {}, nil
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var kc, cc *spendCount
	if k.DailyLimitMicros != nil || k.MonthlyLimitMicros != nil {
		kc = h.keys.count(k.KeyID, k.Version, now)
		vt := time.Unix(0, k.Version)
		for _, l := range [...]struct {
			limit      *int64
			spent      int64 // in the state, of its day or month
			charged    int64 // since, today or this month
			samePeriod bool  // the state's day or month is now's
			what       string
			until      time.Time
		}{
			{k.DailyLimitMicros, k.DaySpentMicros, kc.dayCharged, utcDay(vt) == kc.day, "daily spend limit", nextDay(now)},
			{k.MonthlyLimitMicros, k.MonthSpentMicros, kc.monthCharged, utcMonth(vt) == kc.month, "monthly spend limit", nextMonth(now)},
		} {
			if l.limit == nil {
				continue
			}
			spent := l.charged
			if l.samePeriod {
				spent += l.spent
			}
			if no := refusalAt(*l.limit-spent, kc.held, kc.open, l.what, l.until); no != nil {
				return nil, no
			}
		}
	}
	if k.CreditLeftMicros != nil {
		cc = h.customers.count(k.CustomerID, k.CustomerVersion, now)
		if no := refusalAt(*k.CreditLeftMicros-cc.charged, cc.held, cc.open, "", time.Time{}); no != nil {
			return nil, no
		}
	}
	for _, c := range []*spendCount{kc, cc} {
		if c != nil {
			c.held += est
			c.open++
		}
	}
	var once sync.Once
	return func(charge int64) {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			at := h.now()
			for _, c := range []*spendCount{kc, cc} {
				if c == nil {
					continue
				}
				c.held -= est
				c.open--
				c.roll(at)
				c.charged += charge
				c.dayCharged += charge
				c.monthCharged += charge
			}
		})
	}, nil
}

// refusalAt is the refusal of a request when what is left of a limit
// after the holds of the requests in flight is 0 or less: left is what is
// left before those holds (micro-units), held what they hold, open how
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

// holdEstimate is what a request by key k for model, whose upstream body
// is body, may cost, in micro-units of k's currency (rounded up): its
// prompt's estimate (the body's bytes / 4, as the tpm_limit's) and its
// output limit (outputLimit) rated as the ledger will; 0 when the gateway
// cannot rate it.
func (s *Server) holdEstimate(k *usage.KeyState, model string, body []byte, now time.Time) int64 {
	if s.rates == nil {
		return 0
	}
	e := usage.Event{CustomerID: k.CustomerID, KeyID: k.KeyID, Model: model, Time: now, Status: usage.StatusOK,
		Usage: usage.Tokens{PromptTokens: int64(len(body) / 4), CompletionTokens: outputLimit(body)}}
	r, ok := s.rates.Rate(&e)
	if !ok {
		return 0
	}
	return chargeMicros(r)
}

// chargeMicros is r's charge (its cost after its discount) in micro-units,
// rounded up; 0 when unpriced.
func chargeMicros(r usage.Rating) int64 {
	if r.Unpriced || r.CostE12 <= 0 {
		return 0
	}
	n := new(big.Int).Mul(big.NewInt(r.CostE12), big.NewInt(int64(10000-r.DiscountBP)))
	n.Add(n, big.NewInt(1e10-1))
	n.Quo(n, big.NewInt(1e10)) // 1e-12 units × 1e-4 (basis points) → micro-units
	if !n.IsInt64() {
		return 1 << 62
	}
	return n.Int64()
}

// outputLimit is the most output tokens a request body asks for: its
// max_completion_tokens, max_tokens (chat, Anthropic), max_output_tokens
// (Responses) or generationConfig.maxOutputTokens (Gemini), in that order,
// times its n (choices) when above 1; defaultHoldOutputTokens when it sets
// none; at most maxHoldOutputTokens. The body is read once, to its first
// level and generationConfig's: a prompt may be megabytes.
func outputLimit(body []byte) int64 {
	// found[i] is the member limitFields[i]'s value, -1 when unset.
	found := [len(limitFields)]int64{-1, -1, -1, -1, -1}
	l := jsonscan.New(body)
	if !l.Lit("{") || l.Lit("}") {
		return defaultHoldOutputTokens
	}
	for {
		key, escaped, ok := l.Span()
		if !ok || escaped || !l.Lit(":") {
			break // a key with escapes names no field here
		}
		l.WS()
		at := l.Pos()
		if !l.Skip() {
			break
		}
		val := body[at:l.Pos()]
		switch k := string(key); k {
		case "generationConfig":
			if v, ok := intMember(val, "maxOutputTokens"); ok {
				found[3] = v
			}
		default:
			for i, name := range limitFields {
				if k == name {
					if v, err := strconv.ParseInt(string(val), 10, 64); err == nil && v >= 0 {
						found[i] = v
					}
				}
			}
		}
		if !l.Lit(",") {
			break
		}
	}
	limit := int64(defaultHoldOutputTokens)
	for _, v := range found[:4] {
		if v >= 0 {
			limit = v
			break
		}
	}
	limit = min(limit, maxHoldOutputTokens)
	if n := found[4]; n > 1 && n <= 128 {
		limit = min(limit*n, maxHoldOutputTokens)
	}
	return limit
}

// limitFields are the members outputLimit reads, in the order they win;
// index 3 is generationConfig.maxOutputTokens's, 4 the choices (n).
var limitFields = [...]string{"max_completion_tokens", "max_tokens", "max_output_tokens", "", "n"}

// intMember is obj's top-level member name as a non-negative integer,
// ok=false when it is absent or not one.
func intMember(obj []byte, name string) (int64, bool) {
	raw, ok, err := jsonscan.Member(obj, name)
	if !ok || err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
