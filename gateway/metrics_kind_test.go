package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// TestUpstreamErrorKinds: a provider that cannot be reached is counted as
// kind "unreachable", not "refused", which the runbook reads as the
// provider's own 4xx/5xx (an observability review: a dead port counted as
// refused sent the operator to check the key and the quota); a provider's
// 400 for the client's own request is kind "invalid_request", which the
// TollgateUpstreamErrors alert leaves out (an operator review: three bad
// requests among 14 read as a provider failing 21% of them).
func TestUpstreamErrorKinds(t *testing.T) {
	invalid := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"messages: bad role","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}))
	defer invalid.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"quota","type":"insufficient_quota"}}`, http.StatusTooManyRequests)
	}))
	defer refusing.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "dead", Type: "openai", BaseURL: dead + "/v1", APIKey: "sk-dead"},
			{Name: "refusing", Type: "openai", BaseURL: refusing.URL + "/v1", APIKey: "sk-ref"},
			{Name: "invalid", Type: "openai", BaseURL: invalid.URL + "/v1", APIKey: "sk-inv"},
		},
		Models: []gateway.ModelConfig{{Name: "m-dead", Provider: "dead"}, {Name: "m-refusing", Provider: "refusing"},
			{Name: "m-invalid", Provider: "invalid"}},
	}
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(cfg, gateway.Deps{Providers: []provider.Provider{openai.Provider()},
		Keys: modelLabelKeys{}, Sink: &modelLabelSink{}, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Stop(ctx)
	}()
	for _, model := range []string{"m-dead", "m-refusing", "m-invalid"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer tg-model-label")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	want := map[string]string{"dead": "unreachable", "refusing": "refused", "invalid": "invalid_request"}
	got := map[string]string{}
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = upstreamErrorKinds(t, reg)
	}
	for p, k := range want {
		if got[p] != k {
			t.Fatalf("tollgate_gateway_upstream_errors_total kinds by provider: %v, want %v", got, want)
		}
	}
}

// upstreamErrorKinds returns the kind counted for each provider.
func upstreamErrorKinds(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range counters(t, reg, "tollgate_gateway_upstream_errors_total") {
		if c.value > 0 {
			out[c.labels["provider"]] = c.labels["kind"]
		}
	}
	return out
}
