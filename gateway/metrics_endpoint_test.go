package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// TestResponsesCountedByEndpoint: every route the LLM API serves counts
// its responses (tollgate_gateway_responses_total) under an endpoint of
// its own, never "other", which is for requests no route matched: the
// routes issue 15 added (/v1/embeddings, /v1/completions,
// /v1/models/{id}, the token counters) were counted as "other", beside
// the 404s of mistyped paths.
func TestResponsesCountedByEndpoint(t *testing.T) {
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "sim", Type: "openai", BaseURL: "http://127.0.0.1:9/v1", APIKey: "sk-sim"},
			{Name: "sim-anthropic", Type: "anthropic", BaseURL: "http://127.0.0.1:9/v1", APIKey: "sk-ant"},
			{Name: "sim-gemini", Type: "gemini", BaseURL: "http://127.0.0.1:9/v1beta", APIKey: "sk-gem"},
		},
		Models: []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"}},
	}
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(cfg, gateway.Deps{Providers: []provider.Provider{openai.Provider(), anthropic.Provider(), gemini.Provider()},
		Keys: modelLabelKeys{}, Sink: &modelLabelSink{}, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	h := gw.Handler()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("the handler is a %T, not a chi router: walk its routes another way", h)
	}
	byEndpoint := func() map[string]float64 {
		out := map[string]float64{}
		for _, c := range counters(t, reg, "tollgate_gateway_responses_total") {
			out[c.labels["endpoint"]] += c.value
		}
		return out
	}
	n := 0
	err = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		path := strings.ReplaceAll(route, "/*", "/models/sim-pro:generateContent")
		if strings.HasPrefix(route, "/v1/models/") {
			path = "/v1/models/sim-pro"
		}
		before := byEndpoint()
		rec := httptest.NewRecorder()
		// No key: each route answers 401 (/healthz 200), counted all the same.
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("{}")))
		after := byEndpoint()
		if after["other"] != before["other"] {
			t.Errorf("%s %s (route %s, status %d) is counted as endpoint \"other\"", method, path, route, rec.Code)
		}
		var total, was float64
		for _, v := range after {
			total += v
		}
		for _, v := range before {
			was += v
		}
		if total != was+1 {
			t.Errorf("%s %s: responses_total rose by %v, want 1", method, path, total-was)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("walked %d routes; want the LLM API's every route", n)
	}
	// A path no route serves is "other".
	before := byEndpoint()["other"]
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/nope", nil))
	if got := byEndpoint()["other"]; got != before+1 {
		t.Errorf("an unknown path: \"other\" went from %v to %v, want one more", before, got)
	}
	// The label values dashboards and queries already use stay as they were.
	for _, want := range []string{"/v1/chat/completions", "/v1/responses", "/v1/models", "/anthropic/v1/messages", "/gemini"} {
		if _, ok := byEndpoint()[want]; !ok {
			t.Errorf("no responses counted under endpoint %q; have %v", want, byEndpoint())
		}
	}
}
