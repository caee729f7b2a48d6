package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// The Responses API ends a stream the provider failed with
// response.failed, its error inside the response object
// ({"response":{"error":{"code":"server_error"}}}), not an error event's
// top-level code. Read as no error of the provider's side, a deployment
// failing every Responses stream so kept its share of the traffic, where
// the same failure as an error event rests it.
func TestAResponsesStreamFailedByTheProviderRestsItsDeployment(t *testing.T) {
	var hits atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\n"+
			`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"m","output":[]}}`+"\n\n"+
			"event: response.failed\n"+
			`data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","model":"m","output":[],"error":{"code":"server_error","message":"The model failed to generate a response."}}}`+"\n\n")
	}))
	t.Cleanup(bad.Close)
	st := newStack(t, func(cfg *gateway.Config) {
		cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "bad", Type: "openai", BaseURL: bad.URL + "/v1"})
		cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "mid", Deployments: []gateway.DeploymentConfig{
			{Name: "bad", Provider: "bad", UpstreamModel: "m", Weight: 3},
			{Name: "good", Provider: cfg.Providers[0].Name, UpstreamModel: "sim-small", Weight: 1}}})
		cfg.Retry.Cooldown = time.Hour
	})
	const n = 20
	for range n {
		resp := st.post(t, "/v1/responses", `{"model":"mid","stream":true,"input":"hi there"}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		st.sink.event(t, resp.Header.Get("X-Request-Id"))
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("the deployment whose Responses streams the provider failed got %d of %d streams, want 1 (it rests an hour after it)", got, n)
	}
}
