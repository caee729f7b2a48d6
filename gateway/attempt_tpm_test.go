package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// recShare is a LimitShare that records this gateway's latest counts of
// each key, and sees no other gateway.
type recShare struct {
	mu   sync.Mutex
	last map[string]gateway.LimitCounts
}

func (s *recShare) Others(string) ([]gateway.LimitSecond, int64) { return nil, 0 }

func (s *recShare) Publish(counts []gateway.LimitCounts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range counts {
		if old, ok := s.last[c.KeyID]; ok && c.Seq < old.Seq {
			continue
		}
		s.last[c.KeyID] = c
	}
}

// settled waits for key's requests to end here, and returns its counts.
func (s *recShare) settled(t *testing.T, key string) gateway.LimitCounts {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		c, ok := s.last[key]
		s.mu.Unlock()
		if ok && c.Open == 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s: counts %+v, its requests still open after 5 s", key, c)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestFailedAttemptNotCountedAgainstTPM: tpm_limit counts "prompt +
// completion as the provider reports them, counted as each request
// settles" (docs/pricing-and-budgets.md): the request's tokens. An attempt
// that failed before the client got a byte and was retried elsewhere is
// the operator's cost, not charged (docs/billing.md), yet the usage it
// bills was counted against the key's tpm_limit too, beside the attempt
// that served: the customer was throttled for the operator's failing
// deployment. Here a Gemini deployment's stream reports its prompt
// (usageMetadata, as every Gemini chunk does) in a first chunk with no
// text, which a chat client is not sent, and then breaks: 50 prompt
// tokens billed to the operator, and counted against the customer. Now
// only the attempt that served counts.
//
// On the native routes a stream's first events are held while they carry
// no output (see passThrough's head), as the chat route holds them: the
// same stream on a model with this deployment alone is the client's 502,
// its reported prompt billed, as on the chat route.
func TestFailedAttemptNotCountedAgainstTPM(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"candidates":[{"content":{"role":"model","parts":[]}}],"usageMetadata":{"promptTokenCount":50}}`+"\n\n")
		_ = http.NewResponseController(w).Flush()
		time.Sleep(10 * time.Millisecond)
		panic(http.ErrAbortHandler) // the stream breaks
	}))
	t.Cleanup(bad.Close)
	const secret, keyID = "tg-tpm-failover", "0197a3c2-0000-7000-8000-0000000000f1"
	share := &recShare{last: map[string]gateway.LimitCounts{}}
	cfg, up := simConfig(t)
	base := strings.TrimSuffix(cfg.Providers[0].BaseURL, "/v1")
	cfg.Providers = append(cfg.Providers,
		gateway.ProviderConfig{Name: "bad", Type: "gemini", BaseURL: bad.URL + "/v1beta", APIKey: "gm-bad-123456789"},
		gateway.ProviderConfig{Name: "good", Type: "gemini", BaseURL: base + "/d/good/v1beta", APIKey: "gm-good-123456789"})
	cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "two", Deployments: []gateway.DeploymentConfig{
		{Name: "bad", Provider: "bad", UpstreamModel: "sim-small", Weight: 1 << 30},
		{Name: "good", Provider: "good", UpstreamModel: "sim-small", Weight: 1}}},
		gateway.ModelConfig{Name: "bad-only", Provider: "bad", UpstreamModel: "sim-small"})
	cfg.Retry.Cooldown = time.Hour
	st := &stack{sim: up, sink: &memSink{}, journal: &memJournal{}}
	st.gw = startGateway(t, cfg, gateway.Deps{Providers: providers(), Sink: st.sink, Journal: st.journal, Limits: share,
		Keys: keys{extra: map[string]usage.KeyState{secret: {CustomerID: testCustomer, KeyID: keyID, TPMLimit: 1_000_000}}}})
	st.url = "http://" + st.gw.Addr()

	code, body, id := routeCases[0].send(t, st, "two", secret, true)
	if code != http.StatusOK || !strings.Contains(body, "[DONE]") || strings.Contains(body, `"error"`) {
		t.Fatalf("status %d: %.300s", code, body)
	}
	evs := st.sink.eventsOf(id)
	if len(evs) != 2 || evs[0].Deployment != "bad" || !evs[0].NotCharged || evs[0].Usage.PromptTokens != 50 ||
		evs[1].Deployment != "good" || evs[1].Status != usage.StatusOK || evs[1].NotCharged {
		t.Fatalf("attempts %+v, want bad failed (not charged, 50 prompt tokens billed to the operator), then good served", evs)
	}
	served := evs[1].Usage.Total()
	if c := share.settled(t, keyID); c.Tokens != served {
		t.Errorf("tokens counted against tpm_limit: %d; the request used %d (the failed attempt's %d are the operator's)",
			c.Tokens, served, evs[0].Usage.Total())
	}

	// On the native Gemini route, with no other deployment, the same
	// stream is the client's 502 (its first chunk had no output, and was
	// held): the 50 prompt tokens the provider reported are the request's
	// own, charged and counted, as on the chat route.
	code, body, id = routeCases[2].send(t, st, "bad-only", secret, true)
	evs = st.sink.eventsOf(id)
	if code != http.StatusBadGateway || len(evs) != 1 || evs[0].NotCharged || evs[0].Usage.PromptTokens != 50 {
		t.Fatalf("native: status %d %.300s, attempts %+v; want a 502, its reported prompt charged", code, body, evs)
	}
	if c := share.settled(t, keyID); c.Tokens != served+50 {
		t.Errorf("native: tokens counted against tpm_limit: %d, want %d", c.Tokens, served+50)
	}
}
