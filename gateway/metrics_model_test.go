package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

type modelLabelKeys struct{}

func (modelLabelKeys) LookupKey(secret string) (usage.KeyState, bool) {
	return usage.KeyState{CustomerID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", KeyID: "0197a3c2-9999-7888-8777-666655554444"},
		secret == "tg-model-label"
}

type modelLabelSink struct {
	mu     sync.Mutex
	models []string
}

func (s *modelLabelSink) Publish(_ context.Context, e *usage.Event) error {
	s.mu.Lock()
	s.models = append(s.models, e.Model)
	s.mu.Unlock()
	return nil
}

// TestMetricsModelLabel: a "provider/model" request that routes to an
// entry of the model table is counted under the table's name, as its event
// is recorded and priced; only names outside the table count as "other",
// so that the model label stays bounded.
func TestMetricsModelLabel(t *testing.T) {
	up := httptest.NewServer(sim.New())
	defer up.Close()
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-sim"},
			{Name: "sim-anthropic", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant"},
		},
		Models: []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"},
			{Name: "claude-sim", Provider: "sim-anthropic", UpstreamModel: "sim-pro"}},
	}
	sink := &modelLabelSink{}
	gw, reg := startMetricsGateway(t, cfg, sink, openai.Provider(), anthropic.Provider())
	asked := []string{"sim/sim-pro", "sim-pro", "sim-anthropic/sim-pro", "sim/sim-small"}
	for _, model := range asked {
		if code := chatAs(t, gw, model); code != http.StatusOK {
			t.Fatalf("%s: status %d", model, code)
		}
	}
	want := map[string]float64{"sim-pro": 2, "claude-sim": 1, "other": 1}
	got := map[string]float64{}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = requestsByModel(t, reg)
		if len(got) == len(want) && got["other"] == 1 && got["sim-pro"] == 2 && got["claude-sim"] == 1 {
			break
		}
	}
	for m, n := range want {
		if got[m] != n {
			t.Errorf("tollgate_gateway_requests_total by model: %v, want %v (events recorded as %v)", got, want, sink.models)
			break
		}
	}
}

// startMetricsGateway starts a gateway of cfg and providers (startGateway),
// its keys modelLabelKeys and its events published to sink, and returns it
// with the registry its metrics are in.
func startMetricsGateway(t *testing.T, cfg gateway.Config, sink *modelLabelSink, providers ...provider.Provider) (*gateway.Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return startGateway(t, cfg, gateway.Deps{Providers: providers, Keys: modelLabelKeys{}, Sink: sink, Metrics: reg}), reg
}

// chatAs sends a chat completion of model to gw with modelLabelKeys' key,
// reads its answer and returns its status code.
func chatAs(t *testing.T, gw *gateway.Server, model string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer tg-model-label")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func requestsByModel(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, c := range counters(t, reg, "tollgate_gateway_requests_total") {
		out[c.labels["model"]] += c.value
	}
	return out
}

// counter is one series of a counter (or a gauge): its labels and value.
type counter struct {
	labels map[string]string
	value  float64
}

// counters returns the series of the counter (or gauge) name gathered from reg.
func counters(t *testing.T, reg *prometheus.Registry, name string) []counter {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []counter
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			// A counter's value, or a gauge's (the other is nil, read as 0).
			c := counter{labels: map[string]string{}, value: m.GetCounter().GetValue() + m.GetGauge().GetValue()}
			for _, l := range m.GetLabel() {
				c.labels[l.GetName()] = l.GetValue()
			}
			out = append(out, c)
		}
	}
	return out
}
