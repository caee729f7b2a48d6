package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestUpstreamErrorKinds: a provider that cannot be reached is counted as
// kind "unreachable", not "refused", which the runbook reads as the
// provider's own 4xx/5xx (an observability review: a dead port counted as
// refused sent the operator to check the key and the quota); a provider's
// 400 for the client's own request is kind "invalid_request", which the
// TollgateUpstreamErrors alert leaves out (an operator review: three bad
// requests among 14 read as a provider failing 21% of them), and so is
// OpenAI's 429 "Request too large".
func TestUpstreamErrorKinds(t *testing.T) {
	invalid := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"messages: bad role","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}))
	defer invalid.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"quota","type":"insufficient_quota"}}`, http.StatusTooManyRequests)
	}))
	defer refusing.Close()
	tooLarge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, requestTooLarge.body)
	}))
	defer tooLarge.Close()
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
			{Name: "toolarge", Type: "openai", BaseURL: tooLarge.URL + "/v1", APIKey: "sk-big"},
		},
		Models: []gateway.ModelConfig{{Name: "m-dead", Provider: "dead"}, {Name: "m-refusing", Provider: "refusing"},
			{Name: "m-invalid", Provider: "invalid"}, {Name: "m-toolarge", Provider: "toolarge"}},
	}
	gw, reg := startMetricsGateway(t, cfg, &modelLabelSink{}, openai.Provider())
	for _, model := range []string{"m-dead", "m-refusing", "m-invalid", "m-toolarge"} {
		chatAs(t, gw, model)
	}
	// OpenAI's 429 "Request too large" is the client's prompt past the
	// per-minute limit on its own: the client's request, as a 400 is.
	want := map[string]string{"dead": "unreachable", "refusing": "refused", "invalid": "invalid_request", "toolarge": "invalid_request"}
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

// TestUpstreamErrorKindFailedOver: a deployment that answers 503, and whose
// request goes on to another deployment, is counted as kind "refused" (the
// provider's own 5xx), as it is when no other deployment serves the model.
// Its attempt sent the client nothing, so its event's http_status is 0,
// and it was counted as "stream_error" (a stream that broke), which sent
// the operator reading the Upstream errors panel to look for broken
// streams of a provider that refused every request (an observability
// review, against upstream-sim's fail_all).
func TestUpstreamErrorKindFailedOver(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/v1/chat/completions", http.StatusFound)
	}))
	defer redirecting.Close()
	up := httptest.NewServer(sim.New())
	defer up.Close()
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "failing", Type: "openai", BaseURL: failing.URL + "/v1", APIKey: "sk-fail"},
			{Name: "redirecting", Type: "openai", BaseURL: redirecting.URL + "/v1", APIKey: "sk-redir"},
			{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-sim"},
		},
		Models: []gateway.ModelConfig{
			{Name: "m", Deployments: []gateway.DeploymentConfig{
				{Provider: "failing", UpstreamModel: "sim-pro"}, {Provider: "sim", UpstreamModel: "sim-pro"}}},
			{Name: "r", Deployments: []gateway.DeploymentConfig{
				{Provider: "redirecting", UpstreamModel: "sim-pro"}, {Provider: "sim", UpstreamModel: "sim-pro"}}},
		},
	}
	gw, reg := startMetricsGateway(t, cfg, &modelLabelSink{}, openai.Provider())
	// The deployment is picked at random: send until a request of each
	// model has tried the failing one first and gone on.
	failedOver := func(p string) bool {
		for _, c := range counters(t, reg, "tollgate_gateway_retries_total") {
			if c.labels["provider"] == p && c.value > 0 {
				return true
			}
		}
		return false
	}
	for i := 0; i < 128 && !(failedOver("failing") && failedOver("redirecting")); i++ {
		model := []string{"m", "r"}[i%2]
		if code := chatAs(t, gw, model); code != http.StatusOK {
			t.Fatalf("status %d, want 200 from the second deployment", code)
		}
	}
	if !failedOver("failing") || !failedOver("redirecting") {
		t.Fatal("no request tried a failing deployment")
	}
	if got := upstreamErrorKinds(t, reg); got["failing"] != "refused" || got["redirecting"] != "refused" || len(got) != 2 {
		t.Fatalf("tollgate_gateway_upstream_errors_total kinds by provider: %v, want failing and redirecting: refused", got)
	}
}

// eventSink keeps the events published.
type eventSink struct {
	mu     sync.Mutex
	events []usage.Event
}

func (s *eventSink) Publish(_ context.Context, e *usage.Event) error {
	s.mu.Lock()
	s.events = append(s.events, *e)
	s.mu.Unlock()
	return nil
}

// TestTTFTIncludesFailedAttempts: a request whose first deployment did not
// answer within connect_timeout (300 ms) and that another deployment then
// served got its first byte 300 ms or more after the gateway received
// it, and its event's ttft_ms and duration_ms, and the TTFT and duration
// histograms, say so ("from receiving the request", as the event's and
// the metrics' documentation has it). They were measured from the start
// of the last attempt: 1 ms, while the client had waited 300 ms, so that
// the TTFT panel hid exactly the latency a failing deployment adds.
func TestTTFTIncludesFailedAttempts(t *testing.T) {
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers nothing
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hanging.Close()
	defer close(release)
	up := httptest.NewServer(sim.New())
	defer up.Close()
	const connectTimeout = 300 * time.Millisecond
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "hanging", Type: "openai", BaseURL: hanging.URL + "/v1", APIKey: "sk-hang", ConnectTimeout: connectTimeout},
			{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-sim"},
		},
		Models: []gateway.ModelConfig{{Name: "m", Deployments: []gateway.DeploymentConfig{
			{Provider: "hanging", UpstreamModel: "sim-pro", Weight: 1000}, {Provider: "sim", UpstreamModel: "sim-pro"}}}},
	}
	reg := prometheus.NewRegistry()
	sink := &eventSink{}
	gw, err := gateway.New(cfg, gateway.Deps{Providers: []provider.Provider{openai.Provider()},
		Keys: modelLabelKeys{}, Sink: sink, Metrics: reg})
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
	// The deployment is drawn by weight: send until a request has tried
	// the hanging one first (it then rests, and the next go to sim).
	served := func() *usage.Event {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for i := range sink.events {
			if e := &sink.events[i]; e.Attempt == 2 && e.Status == usage.StatusOK {
				return e
			}
		}
		return nil
	}
	for i := 0; i < 16 && served() == nil; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer tg-model-label")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	e := served()
	if e == nil {
		t.Fatal("no request went on from the hanging deployment to sim")
	}
	if e.TTFTMillis < connectTimeout.Milliseconds() || e.DurationMillis < connectTimeout.Milliseconds() {
		t.Errorf("the served attempt's event: ttft_ms %d, duration_ms %d; want both at least %d (the client waited for the first deployment)",
			e.TTFTMillis, e.DurationMillis, connectTimeout.Milliseconds())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_gateway_ttft_seconds" && mf.GetName() != "tollgate_gateway_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" && l.GetValue() == "sim" && m.GetHistogram().GetSampleSum() < connectTimeout.Seconds() {
					t.Errorf("%s{provider=\"sim\"}: sum %.3f s, want at least %.3f s", mf.GetName(), m.GetHistogram().GetSampleSum(), connectTimeout.Seconds())
				}
			}
		}
	}
}
