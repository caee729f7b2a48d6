package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// h2cSim is upstream-sim serving HTTP/1.1 and cleartext HTTP/2 on one
// port, as cmd/upstream-sim does, counting the protocol of each request
// (but /stats) as its handler sees it and the client addresses (TCP
// connections) of those over HTTP/2.
type h2cSim struct {
	*httptest.Server
	h1, h2 atomic.Int64 // requests by r.ProtoMajor
	mu     sync.Mutex
	h2Addr map[string]bool
}

func (s *h2cSim) h2Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h2Addr)
}

func newH2CSim(t *testing.T) *h2cSim {
	t.Helper()
	s := &h2cSim{h2Addr: map[string]bool{}}
	inner := sim.New()
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/stats") {
			if r.ProtoMajor == 2 {
				s.h2.Add(1)
				s.mu.Lock()
				s.h2Addr[r.RemoteAddr] = true
				s.mu.Unlock()
			} else {
				s.h1.Add(1)
			}
		}
		inner.ServeHTTP(w, r)
	}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s.Config.Protocols = &p
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestH2CUpstream: a provider with protocol h2c is reached over cleartext
// HTTP/2 (the simulator's handler sees ProtoMajor 2), concurrent streams
// share connections, and every stream is metered exactly as the simulator
// billed it, with the usage chunk stripped when the client did not ask for
// it; a provider without the option on the same server still gets
// HTTP/1.1.
func TestH2CUpstream(t *testing.T) {
	up := newH2CSim(t)
	sink := &memSink{}
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "sim-h2c", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-h2c", Protocol: gateway.ProtocolH2C},
			{Name: "sim-h1", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-h1"},
		},
		Models: []gateway.ModelConfig{{Name: "fast", Provider: "sim-h2c", UpstreamModel: "sim-pro"},
			{Name: "plain", Provider: "sim-h1", UpstreamModel: "sim-pro"}},
	}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink})
	st := &stack{gw: gw, url: "http://" + gw.Addr(), sim: up.Server, sink: sink}

	stream := func(t *testing.T, model string, includeUsage bool, i int) (id, body string) {
		t.Helper()
		opts := ""
		if includeUsage {
			opts = `"stream_options":{"include_usage":true},`
		}
		req := fmt.Sprintf(`{"model":%q,"stream":true,%s"max_tokens":%d,"metadata":{"sim_chunks":"%d"},"messages":[{"role":"user","content":"count to %d please"}]}`,
			model, opts, 8+i, 4+i%3, i)
		status, b, id := readAll(t, st, "/v1/chat/completions", req)
		if status != 200 || !strings.HasSuffix(strings.TrimSpace(b), "data: [DONE]") {
			t.Fatalf("status %d, body:\n%s", status, b)
		}
		return id, b
	}

	// One stream without include_usage, one with it.
	before := st.simStats(t)
	id, body := stream(t, "fast", false, 0)
	if strings.Contains(body, `"usage"`) {
		t.Fatalf("usage reached a client that did not ask for it:\n%s", body)
	}
	after := st.simStats(t)
	e := sink.event(t, id)
	billed := after.Usage()
	billed.PromptTokens -= before.PromptTokens
	billed.CompletionTokens -= before.CompletionTokens
	billed.CachedTokens -= before.CachedTokens
	billed.ReasoningTokens -= before.ReasoningTokens
	if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Provider != "sim-h2c" ||
		e.Usage.PromptTokens != billed.PromptTokens || e.Usage.CompletionTokens != billed.CompletionTokens ||
		e.Usage.CachedTokens != billed.CachedTokens || e.Usage.ReasoningTokens != billed.ReasoningTokens || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, the simulator billed %+v", e, billed)
	}
	if got := after.HTTP2Requests - before.HTTP2Requests; got != 1 || up.h2.Load() != 1 || up.h1.Load() != 0 {
		t.Fatalf("the simulator saw %d requests over HTTP/2 by its stats, %d by ProtoMajor (and %d over HTTP/1), want 1, 1, 0",
			got, up.h2.Load(), up.h1.Load())
	}
	id, body = stream(t, "fast", true, 1)
	e = sink.event(t, id)
	want := fmt.Sprintf(`"usage":{"prompt_tokens":%d,`, e.Usage.PromptTokens)
	if !strings.Contains(body, `"choices":[]`) || !strings.Contains(body, want) || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("usage chunk missing or different from the event (%+v, want %s):\n%s", e.Usage, want, body)
	}

	// Concurrent streams: multiplexed, each metered; the events sum to what
	// the simulator billed.
	before = st.simStats(t)
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i], _ = stream(t, "fast", i%2 == 0, i) })
	}
	wg.Wait()
	after = st.simStats(t)
	var sum usage.Tokens
	for _, id := range ids {
		e := sink.event(t, id)
		if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream {
			t.Fatalf("event %+v", e)
		}
		sum.PromptTokens += e.Usage.PromptTokens
		sum.CompletionTokens += e.Usage.CompletionTokens
	}
	if sum.PromptTokens != after.PromptTokens-before.PromptTokens || sum.CompletionTokens != after.CompletionTokens-before.CompletionTokens ||
		after.Requests.OK-before.Requests.OK != n {
		t.Fatalf("events sum to %+v; the simulator billed prompt %d, completion %d in %d requests", sum,
			after.PromptTokens-before.PromptTokens, after.CompletionTokens-before.CompletionTokens, after.Requests.OK-before.Requests.OK)
	}
	if got := after.HTTP2Requests - before.HTTP2Requests; got != n || up.h2.Load() != n+2 {
		t.Fatalf("%d of %d concurrent requests came over HTTP/2 (ProtoMajor 2: %d of %d)", got, n, up.h2.Load(), n+2)
	}
	if c := up.h2Conns(); c != 1 {
		t.Fatalf("the h2c streams came over %d connections, want 1 (the simulator allows 250 streams on one)", c)
	}

	// The provider without the option: HTTP/1.1 on the same server.
	id, _ = stream(t, "plain", false, 2)
	if e := sink.event(t, id); e.Provider != "sim-h1" || e.Usage.CompletionTokens == 0 || up.h1.Load() != 1 {
		t.Fatalf("event %+v; requests over HTTP/1: %d, want 1", e, up.h1.Load())
	}
}

// TestH2CConfig: protocol takes h2c only, and only for an http:// base URL.
func TestH2CConfig(t *testing.T) {
	for _, c := range []struct {
		url, protocol, want string
	}{
		{"http://127.0.0.1:9/v1", "h2c", ""},
		{"https://api.example.com/v1", "", ""},
		{"https://api.example.com/v1", "h2c", "protocol h2c needs an http:// base_url"},
		{"http://127.0.0.1:9/v1", "h2", `protocol "h2" is not known`},
		{"http://127.0.0.1:9/v1", "HTTP/2", `protocol "HTTP/2" is not known`},
	} {
		cfg := gateway.Config{Providers: []gateway.ProviderConfig{{Name: "p", Type: "openai", BaseURL: c.url, Protocol: c.protocol}},
			Models: []gateway.ModelConfig{{Name: "m", Provider: "p"}}}
		err := cfg.Validate("openai")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %q: %v", c.url, c.protocol, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %q: error %v, want one saying %q", c.url, c.protocol, err, c.want)
		}
	}
}
