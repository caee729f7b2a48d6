package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpendRefusalsDoNotCountAgainstRPM: a request refused for its key's
// spend limit does not count against the key's rpm_limit
// (docs/pricing-and-budgets.md, "Rate limits"). The refusal the state
// published (402 before admission) never counted, but the one a gateway
// makes from its own charges since that state (the spend holds, after the
// request was admitted to the minute) did: a key with an rpm_limit of 3
// whose first request spent its daily limit was answered 402 twice, then
// 429 "requests per minute" for the rest of the minute, and a client
// retrying a 429 spend_held used up its minute the same way.
func TestSpendRefusalsDoNotCountAgainstRPM(t *testing.T) {
	cfg, _ := simConfig(t)
	state := usage.KeyState{CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000002a1", RPMLimit: 3,
		DailyLimitMicros: new(int64(1)), SpendLimited: true, Currency: "USD", Version: time.Now().UnixNano()}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{"tg-rpm": state}},
		Sink: &memSink{}, Journal: &memJournal{}, Rates: priceBook{"sim-small": usd(1_000_000, 1_000_000)}})
	chat := func() (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
			strings.NewReader(`{"model":"sim-small","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer tg-rpm")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(b)
	}
	if code, body := chat(); code != http.StatusOK {
		t.Fatalf("first request: %d %s; want 200", code, body)
	}
	for i := 2; i <= 6; i++ {
		if code, body := chat(); code != http.StatusPaymentRequired || !strings.Contains(body, `"insufficient_quota"`) {
			t.Errorf("request %d, the daily limit spent by the first: %d %s; want 402 insufficient_quota (a spend refusal does not count against rpm_limit 3)",
				i, code, body)
		}
	}
}
