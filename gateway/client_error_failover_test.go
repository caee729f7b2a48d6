package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientErrorIsNotFailedOver: an upstream's 400 or 422 refuses the
// client's request itself, which every deployment would refuse: the
// client gets it as it came, from the one attempt, no other deployment
// is asked, and the deployment does not rest (the next request goes to
// it again). Its event bills nothing, as estimated: the provider
// reported no usage. A mutant that took a 400 for a transient status passed every
// failover test, and let a client with a bad field rest every deployment
// of a model for every customer.
func TestClientErrorIsNotFailedOver(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnprocessableEntity} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			st := stubFirstStack(t, "strict", "picky", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, `{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":null}}`)
			})
			for i := range 2 { // the second: picky did not rest, and is asked first again
				resp := st.post(t, "/v1/chat/completions", `{"model":"strict","messages":[{"role":"user","content":"hi"}]}`)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != status || !strings.Contains(string(body), "invalid_request_error") {
					t.Fatalf("request %d: status %d: %s; want the upstream's %d", i, resp.StatusCode, body, status)
				}
				evs := st.sink.eventsOf(resp.Header.Get("X-Request-Id"))
				if len(evs) != 1 || evs[0].Deployment != "picky" || evs[0].Attempt != 1 || evs[0].HTTPStatus != status ||
					evs[0].Status != usage.StatusUpstreamError || evs[0].Usage.Total() != 0 ||
					evs[0].UsageSource != usage.SourceEstimated {
					t.Fatalf("request %d: attempts %+v, want picky's refusal alone", i, evs)
				}
			}
			if n := st.simStats(t).ByDeployment["other"].Requests.OK; n != 0 {
				t.Errorf("the other deployment served %d requests, want none", n)
			}
		})
	}
}

// stubFirstStack is failoverStack with one more model, named model, of two
// deployments: stub, answered by h on a test server of its own (the
// request's body read first) and weighted to be asked first, and
// "other", the simulator's.
func stubFirstStack(t *testing.T, model, stub string, h http.HandlerFunc) *stack {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return failoverStack(t, func(c *gateway.Config) {
		base := strings.TrimSuffix(c.Providers[0].BaseURL, "/v1")
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: stub, Type: "openai", BaseURL: srv.URL + "/v1"},
			gateway.ProviderConfig{Name: "other", Type: "openai", BaseURL: base + "/d/other/v1"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: model, Deployments: []gateway.DeploymentConfig{
			{Name: stub, Provider: stub, UpstreamModel: "sim-small", Weight: 1 << 30},
			{Name: "other", Provider: "other", UpstreamModel: "sim-small", Weight: 1}}})
	})
}
