package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/openai"
)

// TestUsageSourceCountsEstimates: tollgate_gateway_usage_source_total
// {source="estimated"} counts the events whose tokens the gateway estimated
// because the provider reported none (an OpenAI-compatible API that ignores
// stream_options: its customers are billed by the tokenizer), by provider,
// so that TollgateUsageEstimated names the provider to look at. A request
// the upstream refused produced nothing and bills nothing: it was counted as
// "estimated" too, so that a burst of 429s read on the usage source panel,
// and would page, as a provider whose usage is guessed.
func TestUsageSourceCountsEstimates(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":{"message":"slow down","type":"rate_limit"}}`, http.StatusTooManyRequests)
	}))
	defer refusing.Close()
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"a few words of answer"},"finish_reason":"stop"}]}`)
	}))
	defer silent.Close()
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "refusing", Type: "openai", BaseURL: refusing.URL + "/v1", APIKey: "sk-r"},
			{Name: "silent", Type: "openai", BaseURL: silent.URL + "/v1", APIKey: "sk-s"},
		},
		Models: []gateway.ModelConfig{{Name: "m-refusing", Provider: "refusing"}, {Name: "m-silent", Provider: "silent"}},
	}
	gw, reg := startMetricsGateway(t, cfg, &modelLabelSink{}, openai.Provider())
	if code := chatAs(t, gw, "m-refusing"); code != http.StatusTooManyRequests {
		t.Fatalf("m-refusing: status %d, want the upstream's 429", code)
	}
	if code := chatAs(t, gw, "m-silent"); code != http.StatusOK {
		t.Fatalf("m-silent: status %d, want 200", code)
	}
	got := map[string]float64{}
	for _, c := range counters(t, reg, "tollgate_gateway_usage_source_total") {
		got[c.labels["provider"]+"/"+c.labels["source"]] += c.value
	}
	want := map[string]float64{"silent/estimated": 1}
	if len(got) != len(want) || got["silent/estimated"] != 1 {
		t.Errorf("usage_source_total by provider/source: %v, want %v (a refused request estimates nothing)", got, want)
	}
}
