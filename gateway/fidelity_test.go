package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestNativeErrorEnvelopes: every error the gateway answers itself on a
// native route is in that protocol's envelope, carries X-Request-Id, and
// a missing key is explained the way that protocol's SDKs send it.
func TestNativeErrorEnvelopes(t *testing.T) {
	blocked := usage.KeyState{CustomerID: testCustomer, KeyID: testKeyID, Blocked: "monthly spend limit reached"}
	limited := usage.KeyState{CustomerID: testCustomer, KeyID: testKeyID, RPMLimit: 1}
	st := newStack(t, nil)
	gw, err := gateway.New(gateway.Config{Providers: []gateway.ProviderConfig{
		{Name: "sim-anthropic", Type: "anthropic", BaseURL: st.sim.URL + "/v1"},
		{Name: "sim-gemini", Type: "gemini", BaseURL: st.sim.URL + "/v1beta"}},
		Models:          []gateway.ModelConfig{{Name: "claude-sim", Provider: "sim-anthropic"}, {Name: "gemini-sim", Provider: "sim-gemini"}},
		MaxRequestBytes: 1 << 10},
		gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{"blocked": blocked, "limited": limited}}, Sink: st.sink})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop(t.Context()) })
	st.url = "http://" + gw.Addr()

	const msgs = `{"model":"claude-sim","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	const gem = `{"contents":[{"parts":[{"text":"hi"}]}]}`
	big := `{"model":"claude-sim","max_tokens":8,"messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<10) + `"}]}`
	cases := []struct {
		name, path, body string
		header           []string
		status           int
		want             string // a substring of the body
	}{
		{"anthropic no key", "/anthropic/v1/messages", msgs, []string{"Anthropic-Version", "2023-06-01"}, 401, `"type":"authentication_error"`},
		{"anthropic bad key", "/anthropic/v1/messages", msgs, []string{"X-Api-Key", "nope"}, 401, `"type":"error"`},
		{"anthropic blocked", "/anthropic/v1/messages", msgs, []string{"X-Api-Key", "blocked"}, 402, `"type":"error"`},
		{"anthropic unknown model", "/anthropic/v1/messages", strings.Replace(msgs, "claude-sim", "nope", 1), []string{"X-Api-Key", testKey}, 404, `"type":"not_found_error"`},
		{"anthropic too large", "/anthropic/v1/messages", big, []string{"X-Api-Key", testKey}, 413, `"type":"error"`},
		{"anthropic no route", "/anthropic/v1/nothing", msgs, []string{"X-Api-Key", testKey}, 404, `"type":"error"`},
		{"gemini no key", "/gemini/v1beta/models/gemini-sim:generateContent", gem, nil, 401, `"status":"UNAUTHENTICATED"`},
		{"gemini blocked", "/gemini/v1beta/models/gemini-sim:generateContent", gem, []string{"X-Goog-Api-Key", "blocked"}, 402, `"code":402`},
		{"gemini unknown model", "/gemini/v1beta/models/nope:generateContent", gem, []string{"X-Goog-Api-Key", testKey}, 404, `"status":"NOT_FOUND"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.header
			if h == nil {
				h = []string{"X-Nothing", "1"}
			}
			resp := st.post(t, c.path, c.body, h...)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) || resp.Header.Get("X-Request-Id") == "" {
				t.Fatalf("%d %s (X-Request-Id %q), want %d with %s", resp.StatusCode, body, resp.Header.Get("X-Request-Id"), c.status, c.want)
			}
			if strings.HasPrefix(c.path, "/anthropic") && strings.Contains(string(body), `"code"`) {
				t.Errorf("OpenAI or Google envelope on an Anthropic route: %s", body)
			}
			if strings.Contains(c.name, "no key") {
				var hint string
				if strings.HasPrefix(c.path, "/anthropic") {
					hint = "x-api-key"
				} else {
					hint = "x-goog-api-key"
				}
				if !strings.Contains(string(body), hint) {
					t.Errorf("no-key message does not say %s: %s", hint, body)
				}
			}
		})
	}
	// Over the key's rate limit: 429 in Anthropic's envelope, with Retry-After.
	for i := range 2 {
		resp := st.post(t, "/anthropic/v1/messages", msgs, "X-Api-Key", "limited")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if i == 1 && (resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"type":"rate_limit_error"`)) {
			t.Fatalf("over the limit: %d %s %v", resp.StatusCode, body, resp.Header)
		}
	}
}

// TestUpstreamBackoffHeadersPass: an upstream's Retry-After and
// rate-limit headers reach the client, on errors and on successes.
func TestUpstreamBackoffHeadersPass(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ratelimit-Remaining-Requests", "41")
		w.Header().Set("Anthropic-Ratelimit-Tokens-Remaining", "9000")
		w.Header().Set("Retry-After", "17")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "slow down", "type": "rate_limit_error"}})
	})
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	srv := upstream.URL
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "busy", Type: "openai", BaseURL: srv + "/v1"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "busy", Provider: "busy"})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"busy","messages":[{"role":"user","content":"x"}]}`)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "17" || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "41" ||
		resp.Header.Get("Anthropic-Ratelimit-Tokens-Remaining") != "9000" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
}
