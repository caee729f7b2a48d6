package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// newKeyStack is newStack with extra keys.
func newKeyStack(t *testing.T, extra map[string]usage.KeyState) *stack {
	t.Helper()
	st := newStack(t, nil)
	gw, err := gateway.New(gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"},
			{Name: "sim-anthropic", Type: "anthropic", BaseURL: st.sim.URL + "/v1"},
			{Name: "sim-gemini", Type: "gemini", BaseURL: st.sim.URL + "/v1beta"}},
		Models: []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"}, {Name: "sim-small", Provider: "sim"},
			{Name: "claude-sim", Provider: "sim-anthropic", UpstreamModel: "sim-pro"},
			{Name: "gemini-sim", Provider: "sim-gemini", UpstreamModel: "sim-pro"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{extra: extra}, Sink: st.sink, Journal: st.journal})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Stop(t.Context()) })
	st.gw, st.url = gw, "http://"+gw.Addr()
	return st
}

func answer(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestKeyLimits: an expired key gets 401, a model outside a key's
// allowed_models 403, a request over its requests per minute or its
// concurrent requests 429 with Retry-After, in the route's own envelope.
func TestKeyLimits(t *testing.T) {
	past := time.Now().Add(-time.Minute)
	st := newKeyStack(t, map[string]usage.KeyState{
		"tg-expired": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-00000000000e", ExpiresAt: &past},
		"tg-narrow":  {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-00000000000a", AllowedModels: []string{"sim-small", "sim-anthropic/*"}},
		"tg-rpm":     {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-00000000000b", RPMLimit: 2},
		"tg-conc":    {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-00000000000c", MaxConcurrent: 1},
		"tg-blocked": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-00000000000d", Blocked: "this API key has reached its daily spend limit"},
	})
	chat := func(key, model string) (int, string, http.Header) {
		resp := st.post(t, "/v1/chat/completions", `{"model":"`+model+`","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+key)
		code, body := answer(t, resp)
		return code, body, resp.Header
	}
	if code, body, _ := chat("tg-expired", "sim-pro"); code != 401 || !strings.Contains(body, "expired") {
		t.Errorf("expired key: %d %s", code, body)
	}
	if code, body, _ := chat("tg-blocked", "sim-pro"); code != 402 || !strings.Contains(body, "insufficient_quota") {
		t.Errorf("blocked key: %d %s", code, body)
	}
	if code, body, _ := chat("tg-narrow", "sim-pro"); code != 403 || !strings.Contains(body, `"code":"model_not_allowed"`) {
		t.Errorf("model outside allowed_models: %d %s", code, body)
	}
	if code, _, _ := chat("tg-narrow", "sim-small"); code != 200 {
		t.Errorf("model in allowed_models: %d", code)
	}
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		"x-api-key", "tg-narrow")
	if code, body := answer(t, resp); code != 200 {
		t.Errorf("a provider/* allowance on the native route: %d %s", code, body)
	}
	resp, _ = http.DefaultClient.Do(func() *http.Request {
		r, _ := http.NewRequest("GET", st.url+"/v1/models", nil)
		r.Header.Set("Authorization", "Bearer tg-narrow")
		return r
	}())
	var models struct{ Data []struct{ ID string } }
	_, body := answer(t, resp)
	_ = json.Unmarshal([]byte(body), &models)
	if len(models.Data) != 2 || models.Data[0].ID != "sim-small" || models.Data[1].ID != "claude-sim" {
		t.Errorf("GET /v1/models for a narrow key: %s", body)
	}

	for i := range 2 {
		if code, body, _ := chat("tg-rpm", "sim-small"); code != 200 {
			t.Fatalf("request %d under the rpm limit: %d %s", i, code, body)
		}
	}
	code, body, h := chat("tg-rpm", "sim-small")
	if code != 429 || !strings.Contains(body, `"code":"rate_limit_exceeded"`) || !strings.Contains(body, `"type":"requests"`) || h.Get("Retry-After") == "" {
		t.Errorf("third request in a minute at rpm_limit 2: %d %s, Retry-After %q", code, body, h.Get("Retry-After"))
	}
	resp = st.post(t, "/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		"x-api-key", "tg-rpm")
	if code, body := answer(t, resp); code != 429 || !strings.Contains(body, `"type":"rate_limit_error"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the same on Anthropic's route: %d %s", code, body)
	}

	// One stream open holds the concurrency limit of 1.
	slow := st.post(t, "/v1/chat/completions", `{"model":"sim-small","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"100"}}`,
		"Authorization", "Bearer tg-conc")
	ls := lines(slow.Body)
	until(t, ls, `"content":"tok `)
	if code, body, _ := chat("tg-conc", "sim-small"); code != 429 || !strings.Contains(body, "concurrent") {
		t.Errorf("a second request while one is open at max_concurrent 1: %d %s", code, body)
	}
	until(t, ls, "[DONE]")
	slow.Body.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if code, _, _ := chat("tg-conc", "sim-small"); code == 200 {
			return
		}
	}
	t.Fatal("the concurrency slot was never released")
}
