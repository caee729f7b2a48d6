package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/meter"
)

// replayUpstream serves recorded streams: a request for model "<folder>/<file>"
// gets the bytes of that fixture, cut into uneven writes so that frames
// straddle reads, each flushed.
func replayUpstream(t *testing.T, dir string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil || strings.Contains(req.Model, "..") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, req.Model))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i, n := 0, 7; len(b) > 0; i, n = i+1, n*3%101+1 {
			n = min(n, len(b))
			_, _ = w.Write(b[:n])
			_ = rc.Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestConformanceOpenAIFixtures replays every recorded OpenAI Chat stream
// through the gateway; where the provider reported usage, the ledger must
// hold exactly the usage expected.json gives.
func TestConformanceOpenAIFixtures(t *testing.T) {
	dir, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	expected, err := fixture.LoadExpected(dir)
	if err != nil {
		t.Fatal(err)
	}
	streams, err := fixture.Streams(dir, "openai")
	if err != nil || len(streams) == 0 {
		t.Fatalf("no OpenAI fixtures under %s: %v", dir, err)
	}
	replay := replayUpstream(t, dir)
	s := newStack(t, func(c *fileConfig) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "replay", Type: "openai", BaseURL: replay.URL + "/v1"})
	})
	for _, name := range streams {
		t.Run(name, func(t *testing.T) {
			want, ok := expected[name]
			if !ok {
				t.Fatalf("%s has no entry in expected.json", name)
			}
			resp := s.post("/v1/chat/completions", fmt.Sprintf(
				`{"model":"replay/%s","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, name))
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			e := s.event(resp.Header.Get("X-Request-Id"))
			if e.UsageSource != want.Source {
				t.Fatalf("usage_source = %s, want %s", e.UsageSource, want.Source)
			}
			if got := e.Status == meter.StatusUpstreamError; got != want.UpstreamError {
				t.Errorf("status = %s (%s), want upstream error: %v", e.Status, e.Error, want.UpstreamError)
			}
			if want.Source != meter.SourceUpstream {
				return
			}
			wantUsage := meter.Usage{PromptTokens: want.PromptTokens, CachedTokens: want.CachedTokens,
				CacheWriteTokens: want.CacheWriteTokens, CompletionTokens: want.CompletionTokens,
				ReasoningTokens: want.ReasoningTokens, WebSearchRequests: want.WebSearchRequests}
			if e.Usage != wantUsage || e.Usage.TotalTokens() != want.TotalTokens {
				t.Fatalf("usage = %+v, want %+v (total %d)", e.Usage, wantUsage, want.TotalTokens)
			}
		})
	}
}
