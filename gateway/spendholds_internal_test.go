package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// holdsAt returns spendHolds whose clock reads *now.
func holdsAt(now *time.Time) *spendHolds {
	h := newSpendHolds()
	h.now = func() time.Time { return *now }
	return h
}

// admitted holds n requests of k at est each, failing t unless each is
// admitted, and returns their releases.
func admitted(t *testing.T, h *spendHolds, k *usage.KeyState, n int, est int64) []func(int64) {
	t.Helper()
	var out []func(int64)
	for i := range n {
		release, no := h.hold(k, est)
		if no != nil {
			t.Fatalf("request %d of %d refused: %+v", i+1, n, no)
		}
		out = append(out, release)
	}
	return out
}

// TestSpendHoldsBoundRequestsInFlight: requests sent together on a key with
// 1,000 micro-units left of its daily limit are admitted while what is left
// after their holds is above 0, then refused as held (429) while they run,
// and as spent (402, until midnight) once their charges have used the rest:
// before, every one of them was admitted.
func TestSpendHoldsBoundRequestsInFlight(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	h := holdsAt(&now)
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1500)), DaySpentMicros: 500,
		Version: now.Add(-time.Hour).UnixNano()}
	releases := admitted(t, h, k, 4, 300) // 1000 left: 700, 400, 100, -200
	_, no := h.hold(k, 300)
	if no == nil || !no.held || !strings.Contains(no.message, "held by its 4 requests in flight") {
		t.Fatalf("a fifth request while four hold 1,200 of 1,000 left: %+v; want held", no)
	}
	releases[0](250)
	releases[0](250) // a second call counts nothing
	if _, no := h.hold(k, 300); no == nil || !no.held {
		t.Fatalf("after one ended (250 charged, 900 held): %+v; want held", no)
	}
	for _, r := range releases[1:] {
		r(250)
	}
	_, no = h.hold(k, 300)
	if no == nil || no.held || !no.until.Equal(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)) ||
		no.message != "this API key has reached its daily spend limit" {
		t.Fatalf("1,000 charged since the state, nothing in flight: %+v; want spent until midnight", no)
	}
	// A newer state counts the charges before it: the ledger's 1,400.
	k2 := *k
	k2.DaySpentMicros, k2.Version = 1400, now.UnixNano()
	admitted(t, h, &k2, 1, 300)[0](0)
	// The next day starts at 0, the state's spend being yesterday's.
	now = now.Add(10 * time.Hour)
	k2.DaySpentMicros = 1500
	admitted(t, h, &k2, 5, 300)
}

// TestSpendHoldsMonthlyAndCredit: the monthly limit and the customer's
// credit, shared by its keys, hold the same way; a key without any is not
// counted.
func TestSpendHoldsMonthlyAndCredit(t *testing.T) {
	now := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	h := holdsAt(&now)
	v := now.Add(-time.Minute).UnixNano()
	monthly := &usage.KeyState{KeyID: "m", CustomerID: "c1", MonthlyLimitMicros: new(int64(1000)), MonthSpentMicros: 900, Version: v}
	admitted(t, h, monthly, 1, 100)
	if _, no := h.hold(monthly, 100); no == nil || !no.held || !strings.Contains(no.message, "monthly spend limit") {
		t.Fatalf("monthly: %+v; want held", no)
	}
	now = now.Add(2 * time.Hour) // January: the state's spend was December's
	admitted(t, h, monthly, 3, 50)

	a := &usage.KeyState{KeyID: "a", CustomerID: "c2", CreditLeftMicros: new(int64(100)), CustomerVersion: v}
	b := &usage.KeyState{KeyID: "b", CustomerID: "c2", CreditLeftMicros: new(int64(100)), CustomerVersion: v}
	ra := admitted(t, h, a, 1, 80)
	admitted(t, h, b, 1, 20)
	if _, no := h.hold(b, 10); no == nil || !no.held || !strings.Contains(no.message, "prepaid balance and credit limit is held by its 2") {
		t.Fatalf("the customer's other key while its other requests hold all 100 left: %+v; want held", no)
	}
	ra[0](120) // overran its hold
	if _, no := h.hold(a, 10); no == nil || no.held || !no.until.IsZero() {
		t.Fatalf("credit overspent: %+v; want spent, with no reset", no)
	}
	free := &usage.KeyState{KeyID: "f", CustomerID: "c3"}
	admitted(t, h, free, 100, 1<<40)
	if len(h.keys) != 1 || len(h.customers) != 1 {
		t.Fatalf("counts of %d keys, %d customers; want 1, 1 (a key without limits is not counted)", len(h.keys), len(h.customers))
	}
}

// TestRefuseSpend: a held refusal is a 429 with Retry-After 1; a spent
// limit a 402 insufficient_quota naming its reset, Retry-After the
// seconds to it; spent credit a 402 with neither.
func TestRefuseSpend(t *testing.T) {
	now := time.Date(2026, 12, 4, 23, 59, 0, 500_000_000, time.UTC)
	for _, c := range []struct {
		no         spendRefusal
		status     int
		retryAfter string
		says       string
	}{
		{spendRefusal{held: true, message: "held"}, http.StatusTooManyRequests, "1", `"code":"spend_held"`},
		{spendRefusal{message: "this API key has reached its daily spend limit", until: nextDay(now)}, http.StatusPaymentRequired, "60",
			"daily spend limit; it resets at 2026-12-05T00:00:00Z"},
		{spendRefusal{message: "exhausted"}, http.StatusPaymentRequired, "", `"code":"insufficient_quota"`},
	} {
		w := httptest.NewRecorder()
		refuseSpend(w, chatErrors, &c.no, now)
		if w.Code != c.status || w.Header().Get("Retry-After") != c.retryAfter || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%+v: %d, Retry-After %q, %s; want %d, %q, saying %s", c.no, w.Code, w.Header().Get("Retry-After"),
				w.Body.String(), c.status, c.retryAfter, c.says)
		}
	}
}

// TestOutputLimit: the output a request is held for is what its body
// allows, in each provider's field, times its choices; 4,096 when unset.
func TestOutputLimit(t *testing.T) {
	for body, want := range map[string]int64{
		`{"max_tokens":24}`:                                         24,
		`{"max_completion_tokens":100,"max_tokens":24}`:             100,
		`{"max_output_tokens":7}`:                                   7,
		`{"generationConfig":{"maxOutputTokens":9}}`:                9,
		`{"max_tokens":10,"n":3}`:                                   30,
		`{"messages":[]}`:                                           defaultHoldOutputTokens,
		`{"max_tokens":"lots","n":1e9}`:                             defaultHoldOutputTokens,
		`{"max_tokens":-5}`:                                         defaultHoldOutputTokens,
		`{"max_tokens":1099511627776}`:                              maxHoldOutputTokens,
		`{"max_tokens":900000,"n":100}`:                             maxHoldOutputTokens,
		`{"max_tokens":9223372036854775807,"n":100}`:                maxHoldOutputTokens,
		`{"max_tokens":10,"max_tokens":20}`:                         20,
		`{"messages":[{"max_tokens":5}],"max_tokens":7}`:            7,
		`{"messages":[{"max_tokens":5}]}`:                           defaultHoldOutputTokens,
		`not json`:                                                  defaultHoldOutputTokens,
		`{"generationConfig":{"maxOutputTokens":9},"max_tokens":2}`: 2,
	} {
		if got := outputLimit([]byte(body)); got != want {
			t.Errorf("outputLimit(%s) = %d, want %d", body, got, want)
		}
	}
}

// TestChargeMicros: a rating's charge in micro-units, after its discount,
// rounded up, as math/big computes it exactly.
func TestChargeMicros(t *testing.T) {
	for _, c := range []struct {
		r    usage.Rating
		want int64
	}{
		{usage.Rating{CostE12: 2_625_000_000_00}, 262_500},
		{usage.Rating{CostE12: 1}, 1},
		{usage.Rating{CostE12: 1_000_000, DiscountBP: 5000}, 1},
		{usage.Rating{CostE12: 3_000_000, DiscountBP: 5000}, 2},
		{usage.Rating{CostE12: 1 << 62}, 4_611_686_018_428},
		{usage.Rating{CostE12: 99, Unpriced: true}, 0},
	} {
		if got := chargeMicros(c.r); got != c.want {
			t.Errorf("chargeMicros(%+v) = %d, want %d", c.r, got, c.want)
		}
	}
}

// outputLimitJSON is outputLimit with encoding/json, the baseline it is
// measured against (and agrees with on the bodies of TestOutputLimitAgrees).
func outputLimitJSON(body []byte) int64 {
	var b struct {
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
		MaxTokens           *int64 `json:"max_tokens"`
		MaxOutputTokens     *int64 `json:"max_output_tokens"`
		GenerationConfig    struct {
			MaxOutputTokens *int64 `json:"maxOutputTokens"`
		} `json:"generationConfig"`
		N *int64 `json:"n"`
	}
	if json.Unmarshal(body, &b) != nil {
		return -1
	}
	limit := int64(defaultHoldOutputTokens)
	for _, v := range []*int64{b.MaxCompletionTokens, b.MaxTokens, b.MaxOutputTokens, b.GenerationConfig.MaxOutputTokens} {
		if v != nil && *v >= 0 {
			limit = *v
			break
		}
	}
	limit = min(limit, maxHoldOutputTokens)
	if b.N != nil && *b.N > 1 && *b.N <= 128 {
		limit = min(limit**b.N, maxHoldOutputTokens)
	}
	return limit
}

// bigChatBody is a chat request with a prompt of about n bytes.
func bigChatBody(n int) []byte {
	return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", n/12) +
		`"}],"stream":true,"max_tokens":512,"n":2}`)
}

// TestOutputLimitAgrees: outputLimit reads what encoding/json reads.
func TestOutputLimitAgrees(t *testing.T) {
	for _, body := range []string{
		string(bigChatBody(1000)),
		`{"max_output_tokens":300,"input":[{"max_tokens":1}]}`,
		`{"generationConfig":{"temperature":0.1,"maxOutputTokens":77},"contents":[]}`,
		`{"max_completion_tokens":0,"max_tokens":5}`,
		`{"n":3}`,
		`{}`,
	} {
		if got, want := outputLimit([]byte(body)), outputLimitJSON([]byte(body)); got != want {
			t.Errorf("outputLimit(%.80s) = %d, encoding/json reads %d", body, got, want)
		}
	}
}

// BenchmarkOutputLimit: outputLimit against encoding/json on a chat
// request with a 100 KB prompt.
func BenchmarkOutputLimit(b *testing.B) {
	body := bigChatBody(100_000)
	for _, c := range []struct {
		name string
		f    func([]byte) int64
	}{{"jsonscan", outputLimit}, {"encoding-json", outputLimitJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if c.f(body) != 1024 {
					b.Fatal("wrong limit")
				}
			}
		})
	}
}
