package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// chatBody is a streamed sim-small request for n tokens with sim controls.
func chatBody(n int, includeUsage bool, controls string) string {
	return fmt.Sprintf(`{"model":"sim-small","stream":true,"stream_options":{"include_usage":%v},"max_tokens":%d,`+
		`"metadata":{%s},"messages":[{"role":"user","content":"count to a few"}]}`, includeUsage, n, controls)
}

func expectedUsage(t *testing.T, body string) usage.Tokens {
	t.Helper()
	u, err := sim.ExpectedUsage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return usage.Tokens{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens,
		CompletionTokens: u.CompletionTokens, ReasoningTokens: u.ReasoningTokens}
}

// disconnectAfter sends body and hangs up after reading n data frames; it
// returns the request id.
func (s *stack) disconnectAfter(body string, n int) string {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.gateway+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < n && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			seen++
		}
	}
	cancel()
	resp.Body.Close()
	return resp.Header.Get("X-Request-Id")
}

func TestClientDisconnectDrainsUpstreamUsage(t *testing.T) {
	s := newStack(t, nil)
	body := chatBody(30, false, `"sim_delay_ms":"10"`)
	e := s.event(s.disconnectAfter(body, 3))
	if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceUpstream || e.Usage != expectedUsage(t, body) {
		t.Fatalf("event = %+v, want client_cancelled with the upstream's full usage %+v", e.Event, expectedUsage(t, body))
	}
}

func TestDrainTimeoutFallsBackToEstimate(t *testing.T) {
	s := newStack(t, func(c *fileConfig) { c.DrainTimeout = 100 * time.Millisecond })
	body := chatBody(200, false, `"sim_delay_ms":"20"`)
	e := s.event(s.disconnectAfter(body, 3))
	if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceEstimated ||
		e.Usage.PromptTokens <= 0 || e.Usage.CompletionTokens < 2 || e.Usage.CompletionTokens >= 200 {
		t.Fatalf("event = %+v, want client_cancelled, estimated from what was produced", e.Event)
	}
}

func TestMaxDrainsCutsOffExtraDrains(t *testing.T) {
	s := newStack(t, func(c *fileConfig) { c.MaxDrains = 1 })
	body := chatBody(100, false, `"sim_delay_ms":"20"`)
	first := s.disconnectAfter(body, 2) // drains for about 2s
	second := s.disconnectAfter(body, 2)
	if e := s.event(second); e.UsageSource != usage.SourceEstimated || e.Status != usage.StatusClientCancelled {
		t.Fatalf("second event = %+v, want estimated: no drain slot", e.Event)
	}
	if e := s.event(first); e.UsageSource != usage.SourceUpstream || e.Usage != expectedUsage(t, body) {
		t.Fatalf("first event = %+v, want the drained upstream usage", e.Event)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMidStreamErrorIsForwardedThenDone(t *testing.T) {
	s := newStack(t, nil)
	resp := s.post("/v1/chat/completions", chatBody(10, false, `"sim_fault":"error_after:2"`))
	got := readAll(t, resp)
	if !strings.Contains(got, `data: {"error":`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream = %s, want the error frame then [DONE]", got)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusUpstreamError || e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens < 1 || e.Usage.PromptTokens < 1 {
		t.Fatalf("event = %+v, want upstream_error, estimated from the prompt and the 2 chunks produced", e.Event)
	}
}

func TestStallMidStreamEndsWithErrorAndTimeout(t *testing.T) {
	s := newStack(t, func(c *fileConfig) { c.Providers[0].StallTimeout = 300 * time.Millisecond })
	resp := s.post("/v1/chat/completions", chatBody(10, false, `"sim_fault":"stall"`))
	got := readAll(t, resp)
	if !strings.Contains(got, `"code":"upstream_timeout"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream = %s, want a timeout error frame then [DONE]", got)
	}
	if e := s.event(resp.Header.Get("X-Request-Id")); e.Status != usage.StatusTimeout {
		t.Fatalf("event = %+v, want timeout", e.Event)
	}
}

func TestUpstreamThatNeverAnswersGets504(t *testing.T) {
	s := newStack(t, func(c *fileConfig) { c.Providers[0].ConnectTimeout = 300 * time.Millisecond })
	resp := s.post("/v1/chat/completions", chatBody(10, false, `"sim_fault":"stall_before"`))
	env := decodeError(t, resp)
	if resp.StatusCode != http.StatusGatewayTimeout || *env.Error.Code != "upstream_timeout" {
		t.Fatalf("%d %+v, want 504 upstream_timeout", resp.StatusCode, env)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusTimeout || e.Usage != (usage.Tokens{}) {
		t.Fatalf("event = %+v, want a timeout with nothing billed", e.Event)
	}
}

// TestUsageReachesTheClientOnlyInOpenAIShape runs the upstream usage
// placements past clients that asked for usage and clients that did not.
func TestUsageReachesTheClientOnlyInOpenAIShape(t *testing.T) {
	s := newStack(t, nil)
	for _, fault := range []string{"", "usage_in_finish", "cumulative_usage", "no_done", "usage_in_finish,no_done"} {
		for _, include := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/include_usage=%v", fault, include), func(t *testing.T) {
				body := chatBody(6, include, `"sim_fault":"`+fault+`"`)
				resp := s.post("/v1/chat/completions", body)
				got := readAll(t, resp)
				want := expectedUsage(t, body)
				if !strings.HasSuffix(got, "data: [DONE]\n\n") || strings.Count(got, "[DONE]") != 1 {
					t.Fatalf("stream does not end with one [DONE]:\n%s", got)
				}
				usageChunk := fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d`,
					want.PromptTokens, want.CompletionTokens, want.Total())
				if include {
					if strings.Count(got, `"usage":{`) != 1 || !strings.Contains(got, usageChunk) {
						t.Fatalf("want exactly one usage chunk %s…, got:\n%s", usageChunk, got)
					}
				} else if strings.Contains(got, `"usage"`) {
					t.Fatalf("a client that did not ask got usage:\n%s", got)
				}
				e := s.event(resp.Header.Get("X-Request-Id"))
				if e.Usage != want || e.UsageSource != usage.SourceUpstream {
					t.Fatalf("event = %+v, want upstream usage %+v", e.Event, want)
				}
			})
		}
	}
}

func TestNoUpstreamUsageIsEstimatedAndFlagged(t *testing.T) {
	s := newStack(t, nil)
	resp := s.post("/v1/chat/completions", chatBody(12, true, `"sim_fault":"no_usage"`))
	got := readAll(t, resp)
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.UsageSource != usage.SourceEstimated || e.Usage.PromptTokens <= 0 || e.Usage.CompletionTokens <= 0 {
		t.Fatalf("event = %+v, want an estimate", e.Event)
	}
	// The client asked for usage: it gets the figures it is billed.
	if !strings.Contains(got, fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d`,
		e.Usage.PromptTokens, e.Usage.CompletionTokens)) {
		t.Fatalf("stream lacks the estimated usage chunk:\n%s", got)
	}
}

func TestRevokedKeyIsRefused(t *testing.T) {
	s := newStack(t, nil)
	var keys struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	s.adminDo("GET", "/admin/v1/customers/"+s.customerID+"/keys", "", http.StatusOK, &keys)
	s.adminDo("POST", "/admin/v1/keys/"+keys.Data[0].ID+"/revoke", "", http.StatusOK, nil)
	s.refreshKeys()
	resp := s.post("/v1/chat/completions", chatBody(3, false, ""))
	if env := decodeError(t, resp); resp.StatusCode != 401 || *env.Error.Code != "invalid_api_key" {
		t.Fatalf("revoked key: %d %+v", resp.StatusCode, env)
	}
}

// TestHangingUpAtDoneIsNotACancellation: SDKs close the connection as soon
// as they read [DONE]; a complete stream must still be recorded "ok".
func TestHangingUpAtDoneIsNotACancellation(t *testing.T) {
	s := newStack(t, nil)
	for range 20 {
		req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions", strings.NewReader(chatBody(3, true, "")))
		req.Header.Set("Authorization", "Bearer "+s.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && sc.Text() != "data: [DONE]" {
		}
		resp.Body.Close() // at once, as the SDKs do
		if e := s.event(resp.Header.Get("X-Request-Id")); e.Status != usage.StatusOK {
			t.Fatalf("a complete stream closed at [DONE] was recorded %s", e.Status)
		}
	}
}
