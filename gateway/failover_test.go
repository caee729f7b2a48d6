package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// failoverStack is a gateway whose model "smart" has two deployments, east
// (weight 3) and west (weight 1), both upstream-sim under /d/east and
// /d/west, falling back to "cheap" on /d/spare.
func failoverStack(t *testing.T, edit func(*gateway.Config)) *stack {
	t.Helper()
	return newStack(t, func(c *gateway.Config) {
		base := strings.TrimSuffix(c.Providers[0].BaseURL, "/v1")
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "east", Type: "openai", BaseURL: base + "/d/east/v1"},
			gateway.ProviderConfig{Name: "west", Type: "openai", BaseURL: base + "/d/west/v1"},
			gateway.ProviderConfig{Name: "spare", Type: "openai", BaseURL: base + "/d/spare/v1"})
		c.Models = append(c.Models,
			gateway.ModelConfig{Name: "smart", Deployments: []gateway.DeploymentConfig{
				{Name: "east", Provider: "east", UpstreamModel: "sim-small", Weight: 3},
				{Name: "west", Provider: "west", UpstreamModel: "sim-small", Weight: 1}},
				Fallbacks: []string{"cheap"}},
			gateway.ModelConfig{Name: "cheap", Deployments: []gateway.DeploymentConfig{
				{Name: "spare", Provider: "spare", UpstreamModel: "sim-small"}}})
		c.Retry.Cooldown = time.Hour // a failed deployment stays out for the test
		if edit != nil {
			edit(c)
		}
	})
}

// setFaults posts knobs for a deployment of the stack's simulator.
func (st *stack) setFaults(t *testing.T, name, knobs string) {
	t.Helper()
	resp, err := http.Post(st.sim.URL+"/d/"+name+"/faults", "application/json", strings.NewReader(knobs))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("faults %s: %d %s", name, resp.StatusCode, b)
	}
}

// eventsOf returns the events of request id: its attempts, in order.
func (m *memSink) eventsOf(id string) []usage.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []usage.Event
	for _, e := range m.events {
		if e.ID == id || e.RequestID == id {
			out = append(out, e)
		}
	}
	return out
}

// TestFailoverOn429And5xx: a 429 or a 5xx is the deployment's failure, and
// so is a 401: the gateway sends the deployment's own key, so a 401 says
// that key is wrong (rotated, revoked, mistyped), which another deployment
// may not be (a failover review: every request drawn to such a deployment
// got its 401, and it never rested).
func TestFailoverOn429And5xx(t *testing.T) {
	for _, status := range []int{401, 429, 500, 503} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			st := failoverStack(t, nil)
			// Both deployments of smart fail once: the request lands on the fallback.
			knobs := `{"fail_next":1,"status":` + strconv.Itoa(status) + `,"retry_after":"7"}`
			st.setFaults(t, "east", knobs)
			st.setFaults(t, "west", knobs)
			resp := st.post(t, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"hi there"}]}`)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			id := resp.Header.Get("X-Request-Id")
			served := st.sink.event(t, id)
			if served.NotCharged || served.Model != "cheap" || served.Deployment != "spare" || served.Attempt != 3 || served.Status != usage.StatusOK {
				t.Fatalf("served attempt %+v", served)
			}
			evs := st.sink.eventsOf(id)
			if len(evs) != 3 {
				t.Fatalf("%d events for the request, want 3: %+v", len(evs), evs)
			}
			seen := map[string]bool{}
			for _, e := range evs[:2] {
				if !e.NotCharged || e.RequestID != id || e.ID == id || e.Status != usage.StatusUpstreamError ||
					e.Usage.Total() != 0 || e.HTTPStatus != 0 || !strings.Contains(e.Error, strconv.Itoa(status)) {
					t.Errorf("failed attempt %+v", e)
				}
				seen[e.Deployment] = true
				if calls := strings.Join(st.journal.of(e.ID), " "); calls != "begin fail end" {
					t.Errorf("journal of the failed attempt %s: %q, want begin fail end", e.ID, calls)
				}
			}
			if !seen["east"] || !seen["west"] {
				t.Errorf("failed attempts on %v, want east and west", seen)
			}
			stats := st.simStats(t)
			if stats.ByDeployment["east"].Requests.Status != 1 || stats.ByDeployment["west"].Requests.Status != 1 ||
				stats.ByDeployment["spare"].Requests.OK != 1 {
				t.Errorf("sim by deployment %+v", stats.ByDeployment)
			}
			if got := stats.ByDeployment["spare"].Usage(); got.PromptTokens != served.Usage.PromptTokens ||
				got.CompletionTokens != served.Usage.CompletionTokens {
				t.Errorf("served usage %+v, sim billed %+v", served.Usage, got)
			}
		})
	}
}

func TestFailoverBeforeFirstByteOnly(t *testing.T) {
	st := failoverStack(t, func(c *gateway.Config) { c.Retry.Cooldown = time.Millisecond })
	// Dying before any frame: nothing reached the client, the next deployment serves.
	st.setFaults(t, "east", `{"die_next":1,"die_after":0}`)
	st.setFaults(t, "west", `{"die_next":1,"die_after":0}`)
	resp := st.post(t, "/v1/chat/completions", `{"model":"smart","stream":true,"messages":[{"role":"user","content":"a b c"}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "data: [DONE]") || strings.Contains(string(body), `"error"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Request-Id")
	if e := st.sink.event(t, id); e.Deployment != "spare" || e.Status != usage.StatusOK || e.NotCharged {
		t.Fatalf("served %+v", e)
	}
	for _, e := range st.sink.eventsOf(id) {
		if e.ID != id && (!e.NotCharged || e.Status != usage.StatusUpstreamError) {
			t.Errorf("failed attempt %+v", e)
		}
	}
	if n := len(st.sink.eventsOf(id)); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}

	// Dying after two content chunks: the client had bytes, so no retry:
	// one attempt, charged, the stream ends in an error.
	// First let the cool-downs of the failures above (1 ms, doubled per
	// failure in a row) pass: while they last, the plan starts with the
	// fallback model, whose deployment would serve the whole stream.
	time.Sleep(50 * time.Millisecond)
	for _, d := range []string{"east", "west"} {
		st.setFaults(t, d, `{"die_next":1,"die_after":2}`)
	}
	resp = st.post(t, "/v1/chat/completions", `{"model":"smart","stream":true,"messages":[{"role":"user","content":"a b c"}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	id = resp.Header.Get("X-Request-Id")
	e := st.sink.event(t, id)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if evs := st.sink.eventsOf(id); len(evs) != 1 || e.NotCharged || e.Status != usage.StatusUpstreamError || e.Attempt != 1 {
		t.Fatalf("attempts after the first byte: %+v", evs)
	}
	stats := st.simStats(t)
	if d := stats.ByDeployment[e.Deployment].Requests.Disconnected; d != 2 {
		t.Errorf("%s disconnected %d times, want 2 (once before, once after the first byte)", e.Deployment, d)
	}
}

func TestCooldownHonoursRetryAfter(t *testing.T) {
	st := failoverStack(t, func(c *gateway.Config) { c.Retry.Cooldown = time.Millisecond; c.Retry.MaxCooldown = time.Hour })
	st.setFaults(t, "east", `{"fail_next":1,"status":429,"retry_after":"3600"}`)
	st.setFaults(t, "west", `{"fail_next":1,"status":429,"retry_after":"3600"}`)
	send := func() usage.Event {
		resp := st.post(t, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"x"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return st.sink.event(t, resp.Header.Get("X-Request-Id"))
	}
	if e := send(); e.Deployment != "spare" {
		t.Fatalf("first request served by %s", e.Deployment)
	}
	// Both smart deployments rest for Retry-After (an hour), far beyond the
	// 1 ms cool-down: the fallback serves everything, first try.
	for range 20 {
		if e := send(); e.Deployment != "spare" || e.Attempt != 1 {
			t.Fatalf("during the cool-down: %+v", e)
		}
	}
	stats := st.simStats(t)
	if east, west := stats.ByDeployment["east"].Requests.Total, stats.ByDeployment["west"].Requests.Total; east != 1 || west != 1 {
		t.Errorf("east saw %d, west %d requests during their cool-down, want 1 each", east, west)
	}
}

func TestWeightsWithinTolerance(t *testing.T) {
	st := failoverStack(t, nil)
	const n = 1000
	for range n {
		resp := st.post(t, "/v1/chat/completions", `{"model":"smart","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	stats := st.simStats(t)
	east := stats.ByDeployment["east"].Requests.OK
	west := stats.ByDeployment["west"].Requests.OK
	// Weights 3:1: east's share is binomial(1000, 0.75), standard
	// deviation 13.7; ±5 of them is 682..818.
	if east+west != n || east < 682 || east > 818 {
		t.Fatalf("east %d, west %d of %d requests; want east within 750±68", east, west, n)
	}
}

func TestSingleDeploymentFormUnchanged(t *testing.T) {
	st := newStack(t, nil)
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-small","messages":[{"role":"user","content":"x"}],"metadata":{"sim_status":"429"}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Deployment != "sim/sim-small" || e.Attempt != 1 || e.NotCharged || e.HTTPStatus != 429 {
		t.Fatalf("event %+v", e)
	}
	// The one deployment is still tried though it is cooling down.
	resp = st.post(t, "/v1/chat/completions", `{"model":"sim-small","messages":[{"role":"user","content":"x"}]}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after a 429: status %d", resp.StatusCode)
	}
}

// TestFailoverOnUnexpectedSuccessStatus: an upstream that answers a
// status of 2xx other than 200 (a base_url at a queue's 202 Accepted, a
// proxy's 204 No Content) served nothing, as one that answers 3xx did
// not: the deployment failed, the next one serves, and when none is left
// the client gets 502 in its envelope. Relayed as the upstream's own
// status, the client was told 202 or 204, a success to its SDK, with an
// error object or nothing for a body, the request never went to the
// healthy deployment beside it, and the broken one never rested.
func TestFailoverOnUnexpectedSuccessStatus(t *testing.T) {
	for _, status := range []int{201, 202, 204, 206} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				if status != http.StatusNoContent {
					_, _ = io.WriteString(w, `{"status":"queued"}`)
				}
			}))
			t.Cleanup(odd.Close)
			st := failoverStack(t, func(c *gateway.Config) {
				c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "odd", Type: "openai", BaseURL: odd.URL + "/v1", APIKey: "k"})
				c.Models[len(c.Models)-2].Deployments[0] = gateway.DeploymentConfig{Name: "odd", Provider: "odd", UpstreamModel: "sim-small", Weight: 1 << 30}
				c.Models = append(c.Models, gateway.ModelConfig{Name: "odd-only", Provider: "odd", UpstreamModel: "sim-small"})
			})
			for _, stream := range []string{"false", "true"} {
				resp := st.post(t, "/v1/chat/completions", `{"model":"smart","stream":`+stream+`,"messages":[{"role":"user","content":"hi there"}]}`)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				id := resp.Header.Get("X-Request-Id")
				if resp.StatusCode != 200 || strings.Contains(string(body), `"error"`) {
					t.Fatalf("stream %s: status %d: %s", stream, resp.StatusCode, body)
				}
				if e := st.sink.event(t, id); e.Deployment == "odd" || e.Status != usage.StatusOK || e.NotCharged {
					t.Errorf("stream %s: served by %+v", stream, e)
				}
				evs := st.sink.eventsOf(id)
				if stream == "true" {
					if len(evs) != 1 || evs[0].Deployment == "odd" {
						t.Errorf("stream %s: the deployment that answered %d does not rest: attempts %+v", stream, status, evs)
					}
					continue
				}
				if len(evs) != 2 || evs[0].Deployment != "odd" || !evs[0].NotCharged || evs[0].Status != usage.StatusUpstreamError ||
					!strings.Contains(evs[0].Error, strconv.Itoa(status)) {
					t.Errorf("stream %s: attempts %+v, want the one on odd failed and not charged", stream, evs)
				}
			}
			// Alone, its answer is the client's 502, in OpenAI's envelope.
			resp := st.post(t, "/v1/chat/completions", `{"model":"odd-only","messages":[{"role":"user","content":"hi there"}]}`)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"type":"upstream_error"`) {
				t.Fatalf("alone: status %d: %s", resp.StatusCode, body)
			}
			if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.HTTPStatus != http.StatusBadGateway || e.Status != usage.StatusUpstreamError || e.NotCharged {
				t.Errorf("alone: event %+v", e)
			}
		})
	}
}

// TestUpstream401IsNotTheClientsKey: an upstream's 401 refuses the key the
// gateway sent, the deployment's own, which the client neither sent nor
// can fix. On the last attempt it is answered 502, in the route's
// envelope. Relayed as it came, a client whose key the gateway had just
// accepted got 401 invalid_api_key (OpenAI's words) or
// authentication_error (Anthropic's): the gateway's own answer to a
// revoked key, on which an SDK raises its authentication error and
// retries nothing, and the customer blames (and rotates) its key.
func TestUpstream401IsNotTheClientsKey(t *testing.T) {
	st := failoverStack(t, func(c *gateway.Config) {
		base := strings.TrimSuffix(c.Providers[0].BaseURL, "/v1")
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "claude-d", Type: "anthropic", BaseURL: base + "/d/claude-d/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "claude-d", Provider: "claude-d", UpstreamModel: "sim-small"})
	})
	st.setFaults(t, "spare", `{"fail_all":true,"status":401}`)
	st.setFaults(t, "claude-d", `{"fail_all":true,"status":401}`)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"cheap","messages":[{"role":"user","content":"hi"}]}`, `"type":"upstream_error"`},
		{"/v1/chat/completions", `{"model":"claude-d","messages":[{"role":"user","content":"hi"}]}`, `"type":"upstream_error"`},
		{"/anthropic/v1/messages", `{"model":"claude-d","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, `"type":"api_error"`},
	} {
		resp := st.post(t, c.path, c.body)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), c.want) ||
			strings.Contains(string(body), "invalid_api_key") || strings.Contains(string(body), "authentication_error") {
			t.Errorf("%s %s: status %d: %s; want 502 with %s", c.path, c.body, resp.StatusCode, body, c.want)
			continue
		}
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusUpstreamError || e.HTTPStatus != http.StatusBadGateway || !strings.Contains(e.Error, "401") || e.NotCharged {
			t.Errorf("%s: event %+v", c.path, e)
		}
	}
}

// TestGeminiKeyRefusedFailsOver: Gemini refuses an API key with 400
// INVALID_ARGUMENT and the reason API_KEY_INVALID in its details, not with
// a 401. It is the deployment's own key refused, as an upstream 401 is:
// the next deployment serves, the refused one rests, and alone it is
// answered 502, not a 400 telling the client its key was not valid. As a
// 400 it was the client's error: no failover, no rest, and every request
// drawn to a deployment whose key was rotated got "API key not valid".
func TestGeminiKeyRefusedFailsOver(t *testing.T) {
	const refusal = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, refusal)
	}))
	t.Cleanup(refused.Close)
	st := failoverStack(t, func(c *gateway.Config) {
		base := strings.TrimSuffix(c.Providers[0].BaseURL, "/v1")
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "gm-old", Type: "gemini", BaseURL: refused.URL + "/v1beta", APIKey: "gm-rotated"},
			gateway.ProviderConfig{Name: "gm-new", Type: "gemini", BaseURL: base + "/d/gm-new/v1beta", APIKey: "gm-current"})
		c.Models = append(c.Models,
			gateway.ModelConfig{Name: "gm", Deployments: []gateway.DeploymentConfig{
				{Name: "gm-old", Provider: "gm-old", UpstreamModel: "sim-small", Weight: 1 << 30},
				{Name: "gm-new", Provider: "gm-new", UpstreamModel: "sim-small", Weight: 1}}},
			gateway.ModelConfig{Name: "gm-alone", Provider: "gm-old", UpstreamModel: "sim-small"})
	})
	resp := st.post(t, "/gemini/v1beta/models/gm:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Request-Id")
	evs := st.sink.eventsOf(id)
	if len(evs) != 2 || evs[0].Deployment != "gm-old" || !evs[0].NotCharged || evs[1].Deployment != "gm-new" || evs[1].Status != usage.StatusOK {
		t.Fatalf("attempts %+v, want gm-old refused and not charged, then gm-new", evs)
	}
	// gm-old rests: the next request goes to gm-new first.
	resp = st.post(t, "/v1/chat/completions", `{"model":"gm","messages":[{"role":"user","content":"hi"}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if evs := st.sink.eventsOf(resp.Header.Get("X-Request-Id")); resp.StatusCode != 200 || len(evs) != 1 || evs[0].Deployment != "gm-new" {
		t.Fatalf("while gm-old rests: status %d %s, attempts %+v", resp.StatusCode, body, evs)
	}
	for _, c := range []struct{ path, body, header string }{
		{"/gemini/v1beta/models/gm-alone:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key"},
		{"/v1/chat/completions", `{"model":"gm-alone","messages":[{"role":"user","content":"hi"}]}`, "Authorization"},
	} {
		v := testKey
		if c.header == "Authorization" {
			v = "Bearer " + testKey
		}
		resp := st.post(t, c.path, c.body, c.header, v)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), "API key not valid") {
			t.Errorf("%s alone: status %d: %s; want 502", c.path, resp.StatusCode, body)
		}
	}
}

// TestUpstream402FailsOver: an upstream's 402 (Anthropic's billing_error,
// OpenRouter's or Mistral's payment_required) says the operator's account
// with the provider cannot pay, never the client's: the deployment's
// failure, as a 401 is, and as billing_error already was under a 200. The
// next deployment serves; alone, the client gets 502. Relayed as a 402,
// the client read the gateway's own refusal of its customer's balance
// (402 insufficient_quota), and the deployment kept its share.
func TestUpstream402FailsOver(t *testing.T) {
	broke := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}`)
	}))
	t.Cleanup(broke.Close)
	st := failoverStack(t, func(c *gateway.Config) {
		base := strings.TrimSuffix(c.Providers[0].BaseURL, "/v1")
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "broke", Type: "anthropic", BaseURL: broke.URL + "/v1", APIKey: "k1"},
			gateway.ProviderConfig{Name: "paid", Type: "anthropic", BaseURL: base + "/d/paid/v1", APIKey: "k2"})
		c.Models = append(c.Models,
			gateway.ModelConfig{Name: "cl", Deployments: []gateway.DeploymentConfig{
				{Name: "broke", Provider: "broke", UpstreamModel: "sim-small", Weight: 1 << 30},
				{Name: "paid", Provider: "paid", UpstreamModel: "sim-small", Weight: 1}}},
			gateway.ModelConfig{Name: "cl-alone", Provider: "broke", UpstreamModel: "sim-small"})
	})
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"cl","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	evs := st.sink.eventsOf(resp.Header.Get("X-Request-Id"))
	if len(evs) != 2 || evs[0].Deployment != "broke" || !evs[0].NotCharged || evs[1].Deployment != "paid" || evs[1].Status != usage.StatusOK {
		t.Fatalf("attempts %+v, want broke refused and not charged, then paid", evs)
	}
	for _, c := range []struct{ path, body, want string }{
		{"/anthropic/v1/messages", `{"model":"cl-alone","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, `"type":"api_error"`},
		{"/v1/chat/completions", `{"model":"cl-alone","messages":[{"role":"user","content":"hi"}]}`, `"type":"upstream_error"`},
	} {
		resp := st.post(t, c.path, c.body, "x-api-key", testKey)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), c.want) || strings.Contains(string(body), "billing_error") {
			t.Errorf("%s alone: status %d: %s; want 502 with %s", c.path, resp.StatusCode, body, c.want)
		}
	}
}

// TestErrorBodyThatNeverEnds: an upstream that answers an error status and
// then holds its body open (a Content-Length it never sends) is bounded
// by its stall_timeout, as any upstream body is: the request fails over to
// the next deployment, or, alone, is answered with the status. The body of
// a refusal was read with no timer at all (connect_timeout ends with the
// headers): such an upstream held the request, and its client, past
// stall_timeout and request_timeout for as long as it liked, and the
// healthy deployment beside it was never tried.
func TestErrorBodyThatNeverEnds(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":`)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(hung.Close)
	st := failoverStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "hung", Type: "openai", BaseURL: hung.URL + "/v1", APIKey: "k",
			StallTimeout: 200 * time.Millisecond, RequestTimeout: 400 * time.Millisecond})
		c.Models[len(c.Models)-2].Deployments[0] = gateway.DeploymentConfig{Name: "hung", Provider: "hung", UpstreamModel: "sim-small", Weight: 1 << 30}
		c.Models = append(c.Models, gateway.ModelConfig{Name: "hung-only", Provider: "hung", UpstreamModel: "sim-small"})
	})
	send := func(model string) (*http.Response, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi there"}]}`))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	resp, body := send("smart")
	if resp.StatusCode != 200 {
		t.Fatalf("smart: status %d: %s", resp.StatusCode, body)
	}
	evs := st.sink.eventsOf(resp.Header.Get("X-Request-Id"))
	if len(evs) != 2 || evs[0].Deployment != "hung" || !evs[0].NotCharged || evs[0].Status != usage.StatusUpstreamError || evs[1].Status != usage.StatusOK {
		t.Fatalf("attempts %+v, want hung failed and not charged, then served", evs)
	}
	resp, body = send("hung-only")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("hung-only: status %d: %s", resp.StatusCode, body)
	}
}

// TestEmbeddingsBatchBodyThatNeverEnds: the body of a Gemini embeddings
// request's second batch is bounded by stall_timeout as the first's is.
// Between batches the stall timer is stopped (the next batch's headers
// are awaited under connect_timeout), and the body read after them armed
// it stopped still: a second batch whose body never ended held the
// request for as long as its upstream liked.
func TestEmbeddingsBatchBodyThatNeverEnds(t *testing.T) {
	g := &batchGemini{}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			g.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		_, _ = io.WriteString(w, `{"embeddings":[`)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "batch-gemini", Type: "gemini", BaseURL: srv.URL + "/v1beta",
			StallTimeout: 200 * time.Millisecond})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "gemini-emb", Deployments: []gateway.DeploymentConfig{
			{Name: "batch-gemini", Provider: "batch-gemini", UpstreamModel: "text-embedding-004"}}})
	})
	in, _ := json.Marshal(embedInputs(150))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+"/v1/embeddings",
		strings.NewReader(`{"model":"gemini-emb","input":`+string(in)+`}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("150 inputs, the second batch's body never ending: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d: %s; want 504", resp.StatusCode, body)
	}
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusTimeout {
		t.Errorf("event %+v", e)
	}
}

// TestDeploymentRestLogged: a deployment that begins to rest says so in
// the gateway's log, once per rest (not per attempt that fails while it
// rests): which deployment, for how long, and why (its attempt's error);
// and one that serves again after a run of failures says it recovered.
// Neither a metric nor a line said so: a deployment rested for a day by
// an upstream's Retry-After (it wins over max_cooldown) simply lost its
// traffic, and the operator could learn why only from the one request
// line of the attempt that began the rest.
func TestDeploymentRestLogged(t *testing.T) {
	var mu sync.Mutex
	var logged strings.Builder
	cfg, up := simConfig(t)
	base := strings.TrimSuffix(cfg.Providers[0].BaseURL, "/v1")
	cfg.Providers = append(cfg.Providers,
		gateway.ProviderConfig{Name: "east", Type: "openai", BaseURL: base + "/d/east/v1"},
		gateway.ProviderConfig{Name: "west", Type: "openai", BaseURL: base + "/d/west/v1"})
	cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "smart", Deployments: []gateway.DeploymentConfig{
		{Name: "east", Provider: "east", UpstreamModel: "sim-small", Weight: 1 << 30},
		{Name: "west", Provider: "west", UpstreamModel: "sim-small", Weight: 1}}})
	cfg.Retry.Cooldown, cfg.Retry.MaxCooldown = 50*time.Millisecond, time.Hour
	st := &stack{sim: up, sink: &memSink{}, journal: &memJournal{}}
	st.gw = startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: st.journal,
		Log: slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logged}, nil))})
	st.url = "http://" + st.gw.Addr()
	send := func() usage.Event {
		t.Helper()
		resp := st.post(t, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"hi"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return st.sink.event(t, resp.Header.Get("X-Request-Id"))
	}
	lines := func(msg string) []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, l := range strings.Split(logged.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
				out = append(out, m)
			}
		}
		return out
	}
	st.setFaults(t, "east", `{"fail_next":1,"status":503,"retry_after":"0.2"}`)
	if e := send(); e.Deployment != "west" {
		t.Fatalf("served by %s", e.Deployment)
	}
	rests := lines("gateway: deployment resting")
	if len(rests) != 1 || rests[0]["deployment"] != "east" || rests[0]["model"] != "smart" || rests[0]["provider"] != "east" ||
		rests[0]["rest"] != "200ms" || rests[0]["failures"] != float64(1) || !strings.Contains(fmt.Sprint(rests[0]["error"]), "upstream status 503") {
		t.Fatalf("rest lines %v, want one for east: 200ms (its Retry-After), its first failure, upstream status 503", rests)
	}
	time.Sleep(250 * time.Millisecond)
	if e := send(); e.Deployment != "east" {
		t.Fatalf("after the rest: served by %s", e.Deployment)
	}
	if back := lines("gateway: deployment recovered"); len(back) != 1 || back[0]["deployment"] != "east" || back[0]["failures"] != float64(1) {
		t.Fatalf("recovery lines %v, want one for east after 1 failure", back)
	}
	if e := send(); e.Deployment != "east" || len(lines("gateway: deployment recovered")) != 1 {
		t.Fatalf("a success without failures before it logged a recovery, or went to %s", e.Deployment)
	}
	// A "provider/model" name outside the table has no health kept (a
	// deployment of its own, each request): its failures rest nothing, and
	// log no rest, one line a failed request.
	st.setFaults(t, "east", `{"fail_next":1,"status":503}`)
	resp := st.post(t, "/v1/chat/completions", `{"model":"east/sim-pro","messages":[{"role":"user","content":"hi"}]}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("east/sim-pro: status %d", resp.StatusCode)
	}
	st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if rests := lines("gateway: deployment resting"); len(rests) != 1 {
		t.Fatalf("rest lines %v, want only the first (east's)", rests)
	}
}
