package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// priceBook is a Rater with one price a model, rating as the ledger does
// (usage.RateEvent, as meter/keys.Cache rates); a model it does not price
// is unpriced.
type priceBook map[string]usage.Price

func (b priceBook) Rate(e *usage.Event) (usage.Rating, bool) {
	p, ok := b[e.Model]
	if !ok {
		return usage.Rating{Unpriced: true}, true
	}
	r, err := usage.RateEvent(e, []usage.Price{p}, nil)
	return r, err == nil
}

// usd is a USD price of input and output micro-units per 1M tokens.
func usd(input, output int64) usage.Price {
	return usage.Price{ID: 1, Currency: "USD", InputMicros: input, CacheWriteMicros: input, OutputMicros: output,
		EffectiveFrom: time.Unix(0, 0)}
}

// TestSpendHoldsReadEveryOutputLimit: ten requests at once, each asking
// for 100,000 output tokens of a $10-per-1M model ($1), on a key with $1
// left of its daily limit, however they spell the limit and however their
// failover is priced: one is admitted, nine held (429 spend_held). A
// review found the hold read only the first spelling it knew (an escaped
// or upper-case name, a decoy max_tokens before the field the route reads,
// held 4,096 tokens: 25 of 40 served, $25 charged), and only the first
// attempt's price (a cheap model failing over to sim-pro: $15).
func TestSpendHoldsReadEveryOutputLimit(t *testing.T) {
	cfg, _ := simConfig(t)
	cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "dead", Type: "openai", BaseURL: "http://127.0.0.1:1/v1"})
	cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "cheap", Provider: "dead", UpstreamModel: "sim-small", Fallbacks: []string{"sim-pro"}})
	slow := `"metadata":{"sim_chunks":"4","sim_delay_ms":"300"}`
	chat := `"messages":[{"role":"user","content":"hi"}],"stream":true,` + slow
	gem := `"contents":[{"parts":[{"text":"hi"}]}],"labels":{"sim_chunks":"4","sim_delay_ms":"300"}`
	resp := `"input":"hi","stream":true,` + slow
	gemini := "/gemini/v1beta/models/gemini-sim:streamGenerateContent?alt=sse"
	cases := []struct{ name, path, body string }{
		{"upper-case max_tokens", "/v1/chat/completions", `{"model":"sim-pro","MAX_TOKENS":100000,` + chat + `}`},
		{"escaped max_output_tokens", "/v1/responses", `{"model":"sim-pro","max_output_tok\u0065ns":100000,` + resp + `}`},
		{"a decoy max_tokens", "/v1/responses", `{"model":"sim-pro","max_tokens":1,"max_output_tokens":100000,` + resp + `}`},
		{"a decoy before generationConfig", gemini, `{"max_tokens":1,"generationConfig":{"maxOutputTokens":100000},` + gem + `}`},
		{"escaped generationConfig", gemini, `{"generati\u006fnConfig":{"maxOutputTokens":100000},` + gem + `}`},
		{"failover to a pricier model", "/v1/chat/completions", `{"model":"cheap","max_tokens":100000,` + chat + `}`},
	}
	states := map[string]usage.KeyState{}
	for i, c := range cases {
		states["tg-"+c.name] = usage.KeyState{CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000001" + string(rune('a'+i)) + "0",
			DailyLimitMicros: new(int64(1_000_000)), SpendLimited: true, Currency: "USD", Version: time.Now().UnixNano()}
	}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{extra: states}, Sink: &memSink{}, Journal: &memJournal{},
		Rates: priceBook{"sim-pro": usd(2_500_000, 10_000_000), "gemini-sim": usd(2_500_000, 10_000_000), "cheap": usd(150_000, 600_000)}})
	for _, c := range cases {
		codes := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+c.path, strings.NewReader(c.body))
				req.Header.Set("Authorization", "Bearer tg-"+c.name)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				mu.Lock()
				codes[res.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if codes[http.StatusOK] != 1 || codes[http.StatusTooManyRequests] != 9 {
			t.Errorf("%s: ten at once on $1 left: statuses %v; want one served, nine held", c.name, codes)
		}
	}
}
