package gateway

import (
	"encoding/json"
	"math"
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

// admitted holds n requests of k at est micro-units each, failing t
// unless each is admitted, and returns their releases, which take the
// charge in micro-units, of a request started now.
func admitted(t *testing.T, h *spendHolds, k *usage.KeyState, n int, est int64) []func(int64) {
	t.Helper()
	var out []func(int64)
	for i := range n {
		release, no := h.hold(k, est*1000)
		if no != nil {
			t.Fatalf("request %d of %d refused: %+v", i+1, n, no)
		}
		at := h.now()
		out = append(out, func(charge int64) { release(charge*1000, at) })
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
	_, no := h.hold(k, 300_000)
	if no == nil || !no.held || !strings.Contains(no.message, "held by its 4 requests in flight") {
		t.Fatalf("a fifth request while four hold 1,200 of 1,000 left: %+v; want held", no)
	}
	releases[0](250)
	releases[0](250) // a second call counts nothing
	if _, no := h.hold(k, 300_000); no == nil || !no.held {
		t.Fatalf("after one ended (250 charged, 900 held): %+v; want held", no)
	}
	for _, r := range releases[1:] {
		r(250)
	}
	_, no = h.hold(k, 300_000)
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
	for _, r := range admitted(t, h, &k2, 5, 300) {
		r(0)
	}
	// A request begun before midnight and ended after it counts in the
	// day it began, as the ledger counts it: not in the new day.
	now = time.Date(2026, 12, 5, 23, 59, 59, 0, time.UTC)
	late := admitted(t, h, &k2, 1, 1500)
	now = now.Add(2 * time.Second)
	late[0](1500)
	admitted(t, h, &k2, 1, 1000)
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
	if _, no := h.hold(monthly, 100_000); no == nil || !no.held || !strings.Contains(no.message, "monthly spend limit") {
		t.Fatalf("monthly: %+v; want held", no)
	}
	now = now.Add(2 * time.Hour) // January: the state's spend was December's
	admitted(t, h, monthly, 3, 50)

	a := &usage.KeyState{KeyID: "a", CustomerID: "c2", CreditLeftMicros: new(int64(100)), CustomerVersion: v}
	b := &usage.KeyState{KeyID: "b", CustomerID: "c2", CreditLeftMicros: new(int64(100)), CustomerVersion: v}
	ra := admitted(t, h, a, 1, 80)
	admitted(t, h, b, 1, 20)
	if _, no := h.hold(b, 10_000); no == nil || !no.held || !strings.Contains(no.message, "prepaid balance and credit limit is held by its 2") {
		t.Fatalf("the customer's other key while its other requests hold all 100 left: %+v; want held", no)
	}
	ra[0](120) // overran its hold
	if _, no := h.hold(a, 10_000); no == nil || no.held || !no.until.IsZero() {
		t.Fatalf("credit overspent: %+v; want spent, with no reset", no)
	}
	free := &usage.KeyState{KeyID: "f", CustomerID: "c3"}
	admitted(t, h, free, 100, 1<<30)
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

// TestOutputLimit: the output a request is held for is the most its
// upstream's API may read in its body, whatever the case or escapes of
// its names, times its choices; at least 4,096 when no name is exactly
// the API's limit, the most when unreadable; a field of another API is
// not read. (With the cases of a review that held 4,096 tokens, or 1, for
// a request billed 100,000.)
func TestOutputLimit(t *testing.T) {
	const (
		chat     = "/chat/completions"
		legacy   = "/completions"
		resp     = "/responses"
		messages = "/messages"
		gemini   = "/models/m:streamGenerateContent?alt=sse"
	)
	for _, c := range []struct {
		path, body string
		want       int64
	}{
		{chat, `{"max_tokens":24}`, 24},
		{chat, `{"max_completion_tokens":100,"max_tokens":24}`, 100},
		{chat, `{"max_completion_tokens":0,"max_tokens":100000}`, 100000},
		{chat, `{"max_tokens":10,"n":3}`, 30},
		{chat, `{"max_tokens":1000,"n":129}`, 129000},
		{chat, `{"max_tokens":1000,"n":2.0}`, 2000},
		{chat, `{"max_tokens":1000,"n":"8"}`, maxHoldOutputTokens},
		{chat, `{"max_tok\u0065ns":100000}`, 100000},
		{chat, `{"\u0074emperature":1,"max_tokens":100000}`, 100000},
		{chat, `{"MAX_TOKENS":100000}`, 100000},
		{chat, `{"max_tokenſ":100000}`, 100000},
		{chat, `{"MAX_TOKENS":1}`, defaultHoldOutputTokens}, // a strict upstream reads no limit
		{chat, `{"max_tokens":24,"MAX_TOKENS":1}`, 24},
		{chat, `{"maxTokens":1}`, defaultHoldOutputTokens}, // no API's name on chat
		{chat, `{"max_output_tokens":1}`, defaultHoldOutputTokens},
		{chat, `{"max_tokens":1e5}`, 100000},
		{chat, `{"max_tokens":100000.5}`, 100001},
		{chat, `{"max_tokens":"100000"}`, maxHoldOutputTokens},
		{chat, `{"max_tokens":99999999999999999999}`, maxHoldOutputTokens},
		{chat, `{"max_tokens":10,"max_tokens":20}`, 20},
		{chat, `{"max_tokens":100000,"max_tokens":1}`, 100000},
		{chat, `{"max_tokens":0}`, 0},
		{chat, `{"max_tokens":null}`, defaultHoldOutputTokens},
		{chat, `{"max_tokens":-5}`, defaultHoldOutputTokens},
		{chat, `{"messages":[{"max_tokens":5}],"max_tokens":7}`, 7},
		{chat, `{"messages":[{"max_tokens":5}]}`, defaultHoldOutputTokens},
		{chat, `{"max_tokens":1099511627776}`, maxHoldOutputTokens},
		{chat, `{"max_tokens":900000,"n":100}`, 90_000_000},
		{chat, `{"max_tokens":9223372036854775807,"n":100}`, maxHoldOutputTokens},
		{chat, `not json`, maxHoldOutputTokens},
		{chat, `[]`, maxHoldOutputTokens},
		{chat, `{"max_tokens":100000`, maxHoldOutputTokens},
		{legacy, `{"prompt":["a","b","c","d"],"max_tokens":1000,"best_of":5}`, 20000},
		{legacy, `{"prompt":[1,2,3],"max_tokens":10}`, 10},
		{legacy, `{"prompt":[[1,2],[3]],"max_tokens":10}`, 20},
		{resp, `{"max_output_tokens":7}`, 7},
		{resp, `{"max_output_tok\u0065ns":100000}`, 100000},
		{resp, `{"max_tokens":1,"max_output_tokens":100000}`, 100000},
		{resp, `{"max_tokens":1}`, defaultHoldOutputTokens}, // a decoy: Responses reads max_output_tokens
		{messages, `{"max_tokens":70}`, 70},
		{gemini, `{"generationConfig":{"maxOutputTokens":9}}`, 9},
		{gemini, `{"generation_config":{"max_output_tokens":100000}}`, 100000},
		{gemini, `{"generati\u006fnConfig":{"maxOutputTokens":100000}}`, 100000},
		{gemini, `{"generationconfig":{"maxOutputTokens":100000}}`, 100000},
		{gemini, `{"generationconfig":{"maxOutputTokens":1}}`, defaultHoldOutputTokens},
		{gemini, `{"generationConfig":{"maxOutputTokens":1000,"candidateCount":8}}`, 8000},
		{gemini, `{"max_tokens":1,"generationConfig":{"maxOutputTokens":100000}}`, 100000},
		{gemini, `{"maxOutputTokens":1}`, defaultHoldOutputTokens},
		{"/embeddings", `{"max_tokens":5}`, 0},
		{"/models/m:batchEmbedContents", `{}`, 0},
		{"/messages/count_tokens", `{}`, 0},
		{"/something/else", `{"max_tokens_to_sample":70}`, defaultHoldOutputTokens},
		{"/something/else", `{"max_tokens_to_sample":70000}`, 70000},
	} {
		if got := outputLimit([]byte(c.body), c.path); got != c.want {
			t.Errorf("outputLimit(%s, %s) = %d, want %d", c.body, c.path, got, c.want)
		}
	}
}

// TestChargeNanos: a rating's charge in nano-units, after its discount,
// rounded up, as math/big computes it exactly; a charge beyond any real
// one is unratable.
func TestChargeNanos(t *testing.T) {
	for _, c := range []struct {
		r    usage.Rating
		want int64
	}{
		{usage.Rating{CostE12: 2_625_000_000_00}, 262_500_000},
		{usage.Rating{CostE12: 1}, 1},
		{usage.Rating{CostE12: 1_000_000, DiscountBP: 5000}, 500},
		{usage.Rating{CostE12: 3_001, DiscountBP: 5000}, 2},
		{usage.Rating{CostE12: 1 << 62}, unratable},
		{usage.Rating{CostE12: 99, Unpriced: true}, 0},
	} {
		if got := chargeNanos(c.r); got != c.want {
			t.Errorf("chargeNanos(%+v) = %d, want %d", c.r, got, c.want)
		}
	}
}

// outputLimitJSON is outputLimit on the chat route with encoding/json,
// the baseline it is measured against (and holds at least as much as, by
// TestOutputLimitAgrees and FuzzOutputLimit).
func outputLimitJSON(body []byte) int64 {
	var b struct {
		MaxCompletionTokens *float64 `json:"max_completion_tokens"`
		MaxTokens           *float64 `json:"max_tokens"`
		N                   *float64 `json:"n"`
	}
	if json.Unmarshal(body, &b) != nil {
		return maxHoldOutputTokens
	}
	limit := -1.0
	for _, v := range []*float64{b.MaxCompletionTokens, b.MaxTokens} {
		if v != nil {
			limit = max(limit, *v)
		}
	}
	if limit < 0 {
		limit = defaultHoldOutputTokens
	}
	limit = min(math.Ceil(limit), maxHoldOutputTokens)
	if b.N != nil && *b.N > 1 {
		limit *= math.Ceil(*b.N)
	}
	return int64(min(limit, maxHoldOutputTokens))
}

// bigChatBody is a chat request with a prompt of about n bytes.
func bigChatBody(n int) []byte {
	return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", n/12) +
		`"}],"stream":true,"max_tokens":512,"n":2}`)
}

// TestOutputLimitAgrees: outputLimit reads what encoding/json reads (by
// the largest limit and choices, as outputLimit counts them).
func TestOutputLimitAgrees(t *testing.T) {
	for _, body := range []string{
		string(bigChatBody(1000)),
		`{"max_output_tokens":300,"input":[{"max_tokens":1}]}`,
		`{"prompt":["a","b"],"max_tokens":30,"best_of":3,"n":2}`,
		`{"max_tokens":1,"max_completion_tokens":900}`,
		`{"generationConfig":{"temperature":0.1,"maxOutputTokens":77},"contents":[]}`,
		`{"max_completion_tokens":0,"max_tokens":5}`,
		`{"n":3}`,
		`{}`,
	} {
		if got, want := outputLimit([]byte(body), "/chat/completions"), outputLimitJSON([]byte(body)); got != want {
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
	}{{"jsonscan", func(b []byte) int64 { return outputLimit(b, "/chat/completions") }}, {"encoding-json", outputLimitJSON}} {
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

// BenchmarkSpendHold: a request's hold and release on a key with a daily
// limit and a customer with a credit limit, against the rpm limiter's admit
// and release of the same request (the check every limited request already
// paid), in the same run.
func BenchmarkSpendHold(b *testing.B) {
	now := time.Now()
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1 << 50)),
		CreditLeftMicros: new(int64(1 << 50)), RPMLimit: 1 << 40, Version: now.UnixNano()}
	b.Run("spend-hold", func(b *testing.B) {
		h := newSpendHolds()
		for b.Loop() {
			release, no := h.hold(k, 300)
			if no != nil {
				b.Fatal(no.message)
			}
			release(250, now)
		}
	})
	b.Run("rpm-limiter", func(b *testing.B) {
		l := newLimiter(nil)
		for b.Loop() {
			release, over := l.admit(k, 10)
			if over != nil {
				b.Fatal(over.message)
			}
			release()
		}
	})
}

// FuzzOutputLimit: whatever the body, outputLimit neither fails nor holds
// less than encoding/json reads from it (by the same rule), nor more than
// maxHoldOutputTokens.
func FuzzOutputLimit(f *testing.F) {
	for _, seed := range []string{
		`{"max_tokens":24}`, `{"max_tokenſ":100000}`, `{"MAX_TOKENS":100000,"n":3}`,
		`{"generationConfig":{"maxOutputTokens":1000,"candidateCount":8}}`,
		`{"prompt":["a","b"],"max_tokens":30,"best_of":3}`, `{"max_tok\\u0065ns":7}`,
		`{"max_tokens":1e5,"max_tokens":2}`, `[]`, `{"max_tokens":"9"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := outputLimit(body, "/chat/completions")
		if got < 0 || got > maxHoldOutputTokens {
			t.Fatalf("outputLimit(%q) = %d, out of [0, %d]", body, got, maxHoldOutputTokens)
		}
		if want := outputLimitJSON(body); got < want {
			t.Fatalf("outputLimit(%q) = %d, less than encoding/json reads (%d)", body, got, want)
		}
	})
}

// TestSpendHoldsRefuseAStaleState: a key state read before a newer one
// arrived (and reset the count to it) is refused as stale, for the caller
// to read the key again: checked against it, the charges made between the
// two states were lost (a review: a key 1.6 times over its limit, its
// requests' bodies sent 35 ms after their headers as a state arrived).
func TestSpendHoldsRefuseAStaleState(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	h := holdsAt(&now)
	v1 := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(10_000)),
		CreditLeftMicros: new(int64(50_000)), CustomerVersion: now.Add(-time.Hour).UnixNano(), Version: now.Add(-time.Hour).UnixNano()}
	admitted(t, h, v1, 1, 9000)[0](9000)
	h.arrived(h.keys)("k", now.UnixNano()) // the state of the ledger's 9,000
	if _, no := h.hold(v1, 500_000); no != staleState {
		t.Fatalf("a hold on the state before: %+v; want staleState", no)
	}
	v2 := *v1
	v2.DaySpentMicros, v2.Version = 9000, now.UnixNano()
	admitted(t, h, &v2, 2, 500) // 1,000 left: 500, then 0
	if _, no := h.hold(&v2, 500_000); no == nil || no == staleState || !no.held {
		t.Fatalf("the newer state, 1,000 held of 1,000 left: %+v; want held", no)
	}
	h.arrived(h.customers)("c", now.UnixNano())
	if _, no := h.hold(&v2, 1); no != staleState {
		t.Fatalf("a hold on the customer's state before: %+v; want staleState", no)
	}
}

// staticKey is a KeyLookup that knows one key state, whatever the secret.
type staticKey struct{ k usage.KeyState }

func (s staticKey) LookupKey(string) (usage.KeyState, bool) { return s.k, true }

// TestHoldSpendReadsAStaleKeyAgain: a request whose key was read before a
// newer state arrived is held against the newer state, read again: here
// the ledger's state says the limit is spent (402), where the old one
// would have admitted it.
func TestHoldSpendReadsAStaleKeyAgain(t *testing.T) {
	now := time.Now()
	v1 := usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(10_000)), Version: now.Add(-time.Second).UnixNano()}
	v2 := v1
	v2.DaySpentMicros, v2.Version = 10_000, now.UnixNano()
	s := &Server{keys: staticKey{v2}, spend: newSpendHolds()}
	release, _ := s.spend.hold(&v1, 0) // the count, at v1
	release(0, now)
	s.spend.arrived(s.spend.keys)("k", v2.Version)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Authorization", "Bearer tg-any")
	r, st := stateFor(r)
	st.key, st.hasKey = v1, true
	w := httptest.NewRecorder()
	if s.holdSpend(w, r, []prepared{{path: "/chat/completions"}}, "/v1/chat/completions", chatErrors) ||
		w.Code != http.StatusPaymentRequired || st.key.Version != v2.Version {
		t.Fatalf("a request read at the state before: %d %s, its key at version %d; want 402 on the newer state (%d)",
			w.Code, w.Body, st.key.Version, v2.Version)
	}
}

// oneRate is a Rater that rates every model at one price, as the ledger
// does (usage.RateEvent).
type oneRate usage.Price

func (p oneRate) Rate(e *usage.Event) (usage.Rating, bool) {
	r, err := usage.RateEvent(e, []usage.Price{usage.Price(p)}, nil)
	return r, err == nil
}

// TestHoldEstimateHoldsAPromptAtATokenAByte: a prompt is held at a token a
// byte of its body, at the dearer of its input and cache-write prices; a
// prompt of one-letter words bills a token a word, twice what bytes / 4,
// the tpm_limit's estimate, held (20 such requests at once were charged
// 2.1 times their key's limit). Embeddings hold no output; the dearest of
// the attempts is held.
func TestHoldEstimateHoldsAPromptAtATokenAByte(t *testing.T) {
	s := &Server{rates: oneRate{Currency: "USD", InputMicros: 1_000_000, CacheWriteMicros: 1_250_000, OutputMicros: 2_000_000,
		EffectiveFrom: time.Unix(0, 0)}}
	body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("a ", 2000) + `"}]}`)
	k := &usage.KeyState{CustomerID: "c", KeyID: "k"}
	// len(body) tokens at $1.25 per 1M, 10 tokens at $2: in nano-units.
	want := int64(len(body))*1250 + 10*2000
	if got := s.holdEstimate(k, []prepared{{attempt: attempt{model: "m"}, path: "/chat/completions", body: body}}, "/v1/chat/completions", time.Now()); got != want {
		t.Errorf("a chat request of %d bytes: %d nano-units held, want %d", len(body), got, want)
	}
	if got := s.holdEstimate(k, []prepared{{attempt: attempt{model: "m"}, path: "/embeddings", body: body}}, "/v1/embeddings", time.Now()); got != int64(len(body))*1250 {
		t.Errorf("embeddings: %d nano-units held, want the prompt's alone (%d)", got, int64(len(body))*1250)
	}
	short := []byte(`{"max_tokens":10}`)
	two := []prepared{{attempt: attempt{model: "m"}, path: "/chat/completions", body: short}, {attempt: attempt{model: "m"}, path: "/chat/completions", body: body}}
	if got := s.holdEstimate(k, two, "/v1/chat/completions", time.Now()); got != want {
		t.Errorf("two attempts: %d held, want the dearer's (%d)", got, want)
	}
}
