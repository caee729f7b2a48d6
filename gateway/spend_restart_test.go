package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpendChargesCarryOverARestart: a gateway counts what a key spent
// since its last state until the meter's next state holds it. While the
// meter cannot write, no state comes: a gateway restarted then forgot
// those charges and spent the key's daily limit again, once a restart (a
// spend-limits review: $0.02 on a $0.005 limit after three restarts). The
// charges are journaled, and a gateway started from the journal counts
// them: the key spent before the restart is refused after it.
func TestSpendChargesCarryOverARestart(t *testing.T) {
	cfg, _ := simConfig(t)
	const secret = "tg-spend-restart"
	state := usage.KeyState{CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000005a0",
		DailyLimitMicros: new(int64(1_000)), SpendLimited: true, Currency: "USD", Version: time.Now().UnixNano()}
	deps := func(j *memJournal, carried []byte) gateway.Deps {
		return gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{secret: state}}, Sink: &memSink{},
			Journal: j, Rates: priceBook{"sim-pro": usd(2_500_000, 10_000_000)}, SpendCharges: carried}
	}
	send := func(gw *gateway.Server) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
			strings.NewReader(`{"model":"sim-pro","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	j := &memJournal{}
	first := startGateway(t, cfg, deps(j, nil))
	admitted := 0
	for send(first) == http.StatusOK {
		if admitted++; admitted > 50 {
			t.Fatal("50 requests of about $0.0002 each admitted on a $0.001 daily limit")
		}
	}
	if err := first.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	carried := j.spend
	j.mu.Unlock()
	second := startGateway(t, cfg, deps(&memJournal{}, carried))
	if code := send(second); code != http.StatusPaymentRequired {
		t.Fatalf("after %d requests spent the daily limit and the gateway restarted (no newer state of the key): %d, want 402", admitted, code)
	}
}
