package gateway_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestRedirectLoggedWithTheRequestAndCustomer: the WARN line an
// upstream's redirect writes is a line about a request, and carries its
// request_id and customer_id as every such line does (docs/operations.md,
// "Every line about a request has request_id … and customer_id"): it had
// the request id alone, so an operator could not tell whose request met
// the misconfigured deployment. On a metered route and on token counting.
func TestRedirectLoggedWithTheRequestAndCustomer(t *testing.T) {
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.9.8.7"+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer moved.Close()
	var logged bytes.Buffer
	var mu sync.Mutex
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "moved", Type: "openai", BaseURL: moved.URL + "/v1", APIKey: "sk-moved"},
			{Name: "moved-ant", Type: "anthropic", BaseURL: moved.URL + "/v1", APIKey: "sk-ant-moved"}},
		Models: []gateway.ModelConfig{{Name: "m", Provider: "moved"}, {Name: "ant", Provider: "moved-ant", UpstreamModel: "sim-pro"}},
	}
	sink := &memSink{}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink,
		Log: slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logged}, nil))})
	st := &stack{gw: gw, url: "http://" + gw.Addr(), sink: sink}
	for _, tc := range []struct {
		path, body string
		header     []string
		metered    bool
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil, true},
		{"/anthropic/v1/messages/count_tokens", `{"model":"ant","messages":[{"role":"user","content":"hi"}]}`,
			[]string{"x-api-key", testKey}, false},
	} {
		mu.Lock()
		logged.Reset()
		mu.Unlock()
		resp := st.post(t, tc.path, tc.body, tc.header...)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("%s: status %d, want 502", tc.path, resp.StatusCode)
		}
		rid := resp.Header.Get("X-Request-Id")
		if tc.metered {
			sink.event(t, rid) // the request has ended
		}
		mu.Lock()
		var found bool
		for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) != nil || !strings.Contains(l["msg"].(string), "redirect") {
				continue
			}
			found = true
			if l["request_id"] != rid || l["customer_id"] != testCustomer {
				t.Errorf("%s: the redirect's line has request_id %v and customer_id %v; want %s and %s:\n%s",
					tc.path, l["request_id"], l["customer_id"], rid, testCustomer, line)
			}
		}
		if !found {
			t.Errorf("%s: no line about the redirect:\n%s", tc.path, logged.String())
		}
		mu.Unlock()
	}
}
