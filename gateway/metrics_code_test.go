package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/openai"
)

// TestResponsesCodeLabelBounded: an upstream chooses the status codes the
// gateway passes on, and each code tollgate_gateway_responses_total counted
// under its own label value was a new series in the gateway and in
// Prometheus for good: an upstream (or a client steering a simulator's or
// proxy's status) answering every code from 100 to 999 made about 900
// series per endpoint (measured against upstream-sim: 10,000 requests, 2,500
// of them with a random status, took /metrics from 119 to 584 lines, 400 of
// them responses_total). Codes net/http has no name for count under their
// class ("4xx", "5xx", ...), so the label keeps a bounded set of values.
func TestResponsesCodeLabelBounded(t *testing.T) {
	var next atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		code := int(next.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":{"message":"status ` + strconv.Itoa(code) + `","type":"x"}}`))
	}))
	defer up.Close()
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-sim"}},
		Models:    []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"}},
	}
	gw, reg := startMetricsGateway(t, cfg, &modelLabelSink{}, openai.Provider())
	// The upstream answers 400, 401, ... 599 in turn.
	next.Store(399)
	passed := map[int]bool{}
	for i := 0; i < 200; i++ {
		passed[chatAs(t, gw, "sim-pro")] = true
	}
	if len(passed) < 100 {
		t.Fatalf("the gateway answered only %d distinct codes for 200 upstream ones: the test no longer shows the upstream's codes passed on", len(passed))
	}
	codes := map[string]bool{}
	for _, c := range counters(t, reg, "tollgate_gateway_responses_total") {
		codes[c.labels["code"]] = true
	}
	named := 0
	for code := 400; code < 600; code++ {
		if http.StatusText(code) != "" {
			named++
		}
	}
	// At most every named code and the two classes.
	if len(codes) > named+2 {
		t.Errorf("responses_total has %d code label values after upstream codes 400 to 599 (%d of them named), want at most %d",
			len(codes), named, named+2)
	}
	for _, want := range []string{"404", "429", "503", "4xx", "5xx"} {
		if !codes[want] {
			t.Errorf("no responses_total series with code %q (%d code values)", want, len(codes))
		}
	}
}
