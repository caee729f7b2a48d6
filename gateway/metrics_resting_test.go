package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/openai"
)

// TestDeploymentRestingGauge: a deployment cooling down after a failure
// reads 1 on tollgate_gateway_deployment_resting{provider, deployment},
// the others 0, so that TollgateDeploymentResting can page for a
// deployment that keeps failing while its model's requests fail over to
// the others (the log's "deployment resting" lines were all there was:
// retries_total counts the failovers, and a deployment at rest is not
// even tried, and TollgateProviderFailing waits for a whole provider).
func TestDeploymentRestingGauge(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	up := httptest.NewServer(sim.New())
	defer up.Close()
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "failing", Type: "openai", BaseURL: failing.URL + "/v1", APIKey: "sk-fail"},
			{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-sim"},
		},
		Models: []gateway.ModelConfig{
			{Name: "m", Deployments: []gateway.DeploymentConfig{
				{Provider: "failing", UpstreamModel: "sim-pro"}, {Provider: "sim", UpstreamModel: "sim-pro"}}},
		},
	}
	gw, reg := startMetricsGateway(t, cfg, &modelLabelSink{}, openai.Provider())
	resting := func() map[string]float64 {
		out := map[string]float64{}
		for _, g := range counters(t, reg, "tollgate_gateway_deployment_resting") {
			out[g.labels["provider"]] = g.value
		}
		return out
	}
	if got := resting(); got["failing"] != 0 || got["sim"] != 0 || len(got) != 2 {
		t.Fatalf("deployment_resting by provider before any request: %v, want failing and sim at 0", got)
	}
	// The deployment is picked at random: send until one request has
	// tried the failing one.
	for i := 0; i < 64 && resting()["failing"] == 0; i++ {
		if code := chatAs(t, gw, "m"); code != http.StatusOK {
			t.Fatalf("status %d, want 200 from the second deployment", code)
		}
	}
	if got := resting(); got["failing"] != 1 || got["sim"] != 0 {
		t.Fatalf("deployment_resting by provider after failovers: %v, want failing 1, sim 0", got)
	}
}
