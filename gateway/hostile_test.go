package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientStringsNoEventCouldCarry: a model name no usage event could
// carry as it is (a NUL, invalid UTF-8, 1.5 MiB) is refused with 400 in
// the route's envelope, before any upstream call.
func TestClientStringsNoEventCouldCarry(t *testing.T) {
	st := newStack(t, nil)
	huge := "sim/" + strings.Repeat("x", 3<<19)
	for _, tc := range []struct{ path, body, shape string }{
		{"/v1/chat/completions", `{"model":"sim/x\u0000y","messages":[]}`, `"code":"invalid_request"`},
		{"/v1/chat/completions", "{\"model\":\"sim/x\xffy\",\"messages\":[]}", `"code":"invalid_request"`},
		{"/v1/chat/completions", `{"model":"` + huge + `","messages":[]}`, `"code":"invalid_request"`},
		{"/v1/chat/completions", `{"model":"sim/a\u001bb","messages":[]}`, `control character`},
		{"/v1/responses", `{"model":"sim/x\u0000y","input":"hi"}`, `"code":"invalid_request"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim\u0000","max_tokens":1,"messages":[]}`, `"invalid_request_error"`},
		{"/gemini/v1beta/models/gemini%00sim:generateContent", `{"contents":[]}`, `"INVALID_ARGUMENT"`},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tc.shape) {
			t.Errorf("%s %.60q: %d %s; want 400 with %s", tc.path, tc.body, resp.StatusCode, b, tc.shape)
		}
	}
	if n := st.simStats(t).Requests.Total; n != 0 {
		t.Fatalf("upstream-sim saw %d requests, want none", n)
	}
	if n := st.sink.count(); n != 0 {
		t.Fatalf("%d events, want none: no upstream request was made", n)
	}
}

// TestUpstreamErrorsAreScrubbed: an upstream that echoes the credential it
// was sent, or that cannot be reached, never shows a client the provider's
// key or its internal address; its backoff headers pass.
func TestUpstreamErrorsAreScrubbed(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"slow down, key %s, at %s","type":"rate_limit"}}`,
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "http://"+r.Host+"/v1")
	}))
	defer echo.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "echo", Type: "openai", BaseURL: echo.URL + "/v1", APIKey: secret},
			gateway.ProviderConfig{Name: "gone", Type: "openai", BaseURL: closedURL + "/v1", APIKey: secret})
	})
	for _, model := range []string{"echo/m", "gone/m"} {
		resp := st.post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		host := strings.TrimPrefix(echo.URL, "http://")
		if model == "gone/m" {
			host = strings.TrimPrefix(closedURL, "http://")
		}
		if strings.Contains(string(b), secret) || strings.Contains(string(b), host) {
			t.Errorf("%s: the client sees the provider's key or address: %s", model, b)
		}
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if strings.Contains(e.Error, secret) || strings.Contains(e.Error, host) {
			t.Errorf("%s: the event keeps the provider's key or address: %q", model, e.Error)
		}
		switch model {
		case "echo/m":
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" ||
				!strings.Contains(string(b), "[redacted]") {
				t.Errorf("echo: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
			}
		case "gone/m":
			if resp.StatusCode != 502 || e.Status != usage.StatusUpstreamError {
				t.Errorf("gone: %d %s, event %s", resp.StatusCode, b, e.Status)
			}
		}
	}
}

// TestHostileUpstreamFigures: an upstream's NUL model, negative counts and
// cached tokens beyond its prompt give an event that can be stored:
// cleaned, clamped and flagged; a negative completion count, after output
// reached the client, is no bill: the output is estimated (partial).
func TestHostileUpstreamFigures(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"evil\u0000model","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"evil\u0000model","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":-4,`+
			`"prompt_tokens_details":{"cached_tokens":1000000}}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "evil", Type: "openai", BaseURL: up.URL})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"evil/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.ServedModel != "evil\uFFFDmodel" || e.Usage.CachedTokens != 10 || e.Usage.CompletionTokens != 1 ||
		e.UsageSource != usage.SourcePartial || e.Corrections != "cache_over_prompt,served_model_cleaned" {
		t.Fatalf("event %+v", e)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
}

// everyType configures one upstream at url as a provider of each type,
// with a model each (m: openai "o", claude-m: anthropic "a", gemini-m:
// gemini "g"), and extra openai providers of their own, each serving the
// model of the provider's name with its first letter dropped and "m"
// before it ("oc" serves "mc").
func everyType(url string, extra ...gateway.ProviderConfig) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{
			{Name: "o", Type: "openai", BaseURL: url + "/v1", APIKey: "sk-o-123456789"},
			{Name: "a", Type: "anthropic", BaseURL: url + "/v1", APIKey: "sk-ant-123456789"},
			{Name: "g", Type: "gemini", BaseURL: url + "/v1beta", APIKey: "gm-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "o"}, {Name: "claude-m", Provider: "a"}, {Name: "gemini-m", Provider: "g"}}
		for _, p := range extra {
			p.APIKey = "sk-o-123456789"
			c.Providers = append(c.Providers, p)
			c.Models = append(c.Models, gateway.ModelConfig{Name: "m" + p.Name[1:], Provider: p.Name})
		}
	}
}

// TestUpstreamEmptyStreamIsAnError: an upstream that answers 200 with an
// event stream and closes it cleanly before any data (no chunk, no
// [DONE]; at most a comment) served nothing. It was recorded as a
// completed request with an estimated prompt, and the chat client got an
// empty stream ending in [DONE]; now the client gets 502 (or, after a
// comment, an error frame) and the event is an upstream error with no
// output (nor, when nothing reached the client, a prompt: an upstream that
// failed without producing anything bills nothing), on the chat route and
// on the native ones.
func TestUpstreamEmptyStreamIsAnError(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if strings.HasPrefix(r.URL.Path, "/comment/") {
			_, _ = io.WriteString(w, ": keep-alive\n\n")
		}
	}))
	defer up.Close()
	st := newStack(t, everyType(up.URL, gateway.ProviderConfig{Name: "oc", Type: "openai", BaseURL: up.URL + "/comment/v1"}))
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadGateway},
		{"chat after a comment", "/v1/chat/completions", `{"model":"mc","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
		{"anthropic as chat", "/v1/chat/completions", `{"model":"claude-m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadGateway},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"claude-m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadGateway},
		{"gemini native", "/gemini/v1beta/models/gemini-m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := st.post(t, tc.path, tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if resp.StatusCode != tc.status || !strings.Contains(string(b), "ended before any data") {
				t.Errorf("client got %d %q; want %d and the reason", resp.StatusCode, b, tc.status)
			}
			billed := e.Usage.CompletionTokens
			if tc.status == http.StatusBadGateway {
				billed += e.Usage.PromptTokens // nothing reached the client: nothing is billed
			}
			if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "ended before any data") || billed != 0 {
				t.Errorf("event %s %q %+v; want an upstream error billing nothing", e.Status, e.Error, e.Usage)
			}
		})
	}
}

// TestUpstreamWhitespaceStreamIsAnError: a 200 event stream of nothing but
// blank and whitespace lines is as empty as one with no bytes (the native
// routes already read it so): on the chat route the client gets 502, or
// the next deployment's answer, not a 200 stream that starts with the
// upstream's stray spaces and ends in an error frame.
func TestUpstreamWhitespaceStreamIsAnError(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if strings.HasPrefix(r.URL.Path, "/flip/") && calls.Add(1) > 1 {
			_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}`+"\n\ndata: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(w, "\n  \n\t\r\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{
			{Name: "o", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-o-123456789"},
			{Name: "f1", Type: "openai", BaseURL: up.URL + "/flip/v1", APIKey: "sk-o-123456789"},
			{Name: "f2", Type: "openai", BaseURL: up.URL + "/flip/v1", APIKey: "sk-o-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "o"}, {Name: "two", Deployments: []gateway.DeploymentConfig{
			{Name: "d1", Provider: "f1"}, {Name: "d2", Provider: "f2"}}}}
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != http.StatusBadGateway || e.Status != usage.StatusUpstreamError || e.Usage.Total() != 0 {
		t.Errorf("whitespace stream: client got %d %q, event %s %+v; want 502 and an upstream error billing nothing",
			resp.StatusCode, b, e.Status, e.Usage)
	}
	resp = st.post(t, "/v1/chat/completions", `{"model":"two","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	st.sink.event(t, id)
	if evs := st.sink.eventsOf(id); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "hello") || len(evs) != 2 {
		t.Errorf("whitespace stream then a good one: client got %d %q, %d events; want the second deployment's answer, two events",
			resp.StatusCode, b, len(evs))
	}
}

// TestNativeCommentOnlyStreamBillsNoOutput: a native stream that is only a
// keep-alive comment before a clean end produced nothing, as on the chat
// route (which bills it nothing): it is an upstream error naming the empty
// stream, and the comment is not billed as output.
func TestNativeCommentOnlyStreamBillsNoOutput(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": keep-alive\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{
			{Name: "o", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-o-123456789"},
			{Name: "a", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "o"}, {Name: "claude-m", Provider: "a"}}
	})
	for _, tc := range []struct{ path, body string }{
		{"/anthropic/v1/messages", `{"model":"claude-m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "ended before any data") || e.Usage.CompletionTokens != 0 {
			t.Errorf("%s: client got %d %q; event %s %q %+v; want an upstream error for the empty stream, no output billed",
				tc.path, resp.StatusCode, b, e.Status, e.Error, e.Usage)
		}
	}
}

// TestEmptyStreamAfterTheClientLeft: an upstream that closes its stream
// before any data after the client left is an upstream error that bills
// nothing (an upstream error is named before a client that left), the same
// on the chat route and on the native ones.
func TestEmptyStreamAfterTheClientLeft(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // the client leaves meanwhile
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{
			{Name: "o", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-o-123456789"},
			{Name: "a", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "o"}, {Name: "claude-m", Provider: "a"}}
	})
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/anthropic/v1/messages", `{"model":"claude-m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("%s: answered %d before the client left", tc.path, resp.StatusCode)
		}
		cancel()
		e := st.sink.eventAt(t, tc.path)
		if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "ended before any data") || e.Usage.Total() != 0 {
			t.Errorf("%s: event %s %q %+v; want an upstream error for the empty stream, billing nothing", tc.path, e.Status, e.Error, e.Usage)
		}
	}
}

// eventAt waits for the event of the one request to endpoint.
func (m *memSink) eventAt(t *testing.T, endpoint string) usage.Event {
	t.Helper()
	return m.eventWhere(t, endpoint, func(e *usage.Event) bool { return e.Endpoint == endpoint })
}

// TestUpstreamFailureBeforeAnyEventBillsNothing: an upstream that answers
// 200 and then breaks its stream, or stalls, before any event produced
// nothing; the client got 502 or 504, and the event billed an estimated
// prompt where the README says such a failure bills nothing.
func TestUpstreamFailureBeforeAnyEventBillsNothing(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if strings.HasPrefix(r.URL.Path, "/stall/") {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		panic(http.ErrAbortHandler) // the connection closes mid-body
	}))
	defer up.Close()
	st := newStack(t, everyType(up.URL, gateway.ProviderConfig{Name: "os", Type: "openai", BaseURL: up.URL + "/stall/v1",
		StallTimeout: 200 * time.Millisecond}))
	for _, tc := range []struct {
		name, path, body string
		status           int
		event            usage.Status
	}{
		{"chat, broken", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadGateway, usage.StatusUpstreamError},
		{"chat, stalled", "/v1/chat/completions", `{"model":"ms","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusGatewayTimeout, usage.StatusTimeout},
		{"anthropic as chat, broken", "/v1/chat/completions", `{"model":"claude-m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadGateway, usage.StatusUpstreamError},
		{"anthropic native, broken", "/anthropic/v1/messages", `{"model":"claude-m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadGateway, usage.StatusUpstreamError},
		{"gemini native, broken", "/gemini/v1beta/models/gemini-m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.StatusBadGateway, usage.StatusUpstreamError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := st.post(t, tc.path, tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if resp.StatusCode != tc.status {
				t.Errorf("client got %d %q; want %d", resp.StatusCode, b, tc.status)
			}
			if e.Status != tc.event || e.Usage.PromptTokens+e.Usage.CompletionTokens != 0 {
				t.Errorf("event %s %q %+v; want %s billing nothing", e.Status, e.Error, e.Usage, tc.event)
			}
		})
	}
}

// TestChunkOfManyTinyChoicesIsBounded: a chunk the fast scanner leaves to
// encoding/json ("created" as a text) with 1.5 million empty choices
// (4.5 MB, under the SSE reader's cap) was decoded twice, strictly then
// leniently, into 208-byte choices and a map each: gigabytes of heap for
// megabytes received. It is not decoded: the stream ends as broken, the
// client gets an error frame and the event is an upstream error.
func TestChunkOfManyTinyChoicesIsBounded(t *testing.T) {
	hostile := `data: {"id":"c","created":"x","choices":[` + strings.Repeat(`{},`, 1500000) + `{}]}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		fmt.Fprint(w, hostile)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "evil", Type: "openai", BaseURL: up.URL})
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp := st.post(t, "/v1/chat/completions", `{"model":"evil/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 400<<20 {
		t.Errorf("%d MB allocated for a %d-byte chunk", alloc>>20, len(hostile))
	}
	if e.Status != usage.StatusUpstreamError || !strings.Contains(string(b), `"upstream_error"`) || !strings.Contains(string(b), "hi") {
		t.Fatalf("event %s %q; client got %d %.300s", e.Status, e.Error, resp.StatusCode, b)
	}
}

// TestKeepAlivesForeverEndAtRequestTimeout: an upstream that answered one
// chunk and then kept its stream open with keep-alive comments never
// stalled (every comment is a sign of life), so the stream never ended:
// the client waited for ever, the key's max_concurrent slot stayed taken,
// and the tokens relayed were never metered. request_timeout ends it as a
// timeout: an error event to the chat client, a broken stream to a native
// one, and an event that bills what was relayed.
func TestKeepAlivesForeverEndAtRequestTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(r.URL.Path, "messages") {
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-m\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n")
			fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello there\"}}\n\n")
		} else {
			fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hello there"}}]}`+"\n\n")
		}
		for {
			fmt.Fprint(w, ": keep-alive\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		everyType(up.URL)(c)
		for i := range c.Providers {
			c.Providers[i].StallTimeout, c.Providers[i].RequestTimeout = time.Minute, 500*time.Millisecond
		}
	})
	for _, tc := range []struct{ name, path, body, want string }{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"upstream_timeout"`},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"claude-m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "hello there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body) // a native stream ends broken: its error is expected
			resp.Body.Close()
			if ctx.Err() != nil {
				t.Fatalf("the stream did not end within 30 s (got %.200s)", b)
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("client got %d %.300s; want it to hold %s", resp.StatusCode, b, tc.want)
			}
			// The upstream never went silent: the error event does not say it stalled.
			if tc.name == "chat" && (strings.Contains(string(b), "stalled") || !strings.Contains(string(b), "request_timeout")) {
				t.Errorf("client got %.300s; want an error naming request_timeout, not a stall", b)
			}
			if e.Status != usage.StatusTimeout || !strings.Contains(e.Error, "request_timeout") || e.Usage.CompletionTokens == 0 {
				t.Errorf("event %s %q %+v; want a timeout at request_timeout billing the output relayed", e.Status, e.Error, e.Usage)
			}
		})
	}
}

// TestNonStreamedAnswerSaysWhatIsBilled: a non-streamed chat answer whose
// usage the gateway corrected before billing it (cached tokens beyond the
// prompt, clamped to it) reached the client with the upstream's figures
// unchanged: 1,000,000 cached tokens shown, 10 billed. A streamed
// answer's usage chunk already says what is billed (reportedAsBilled);
// the whole answer must too.
func TestNonStreamedAnswerSaysWhatIsBilled(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},`+
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":1000000}}}`)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "evil", Type: "openai", BaseURL: up.URL})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"evil/m","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Usage.CachedTokens != 10 || !usage.HasCorrection(e.Corrections, usage.CorrectionCacheOverPrompt) {
		t.Fatalf("event %+v %s", e.Usage, e.Corrections)
	}
	var answer struct {
		Usage struct {
			Prompt  int64 `json:"prompt_tokens"`
			Details struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if answer.Usage.Prompt != e.Usage.PromptTokens || answer.Usage.Details.Cached != e.Usage.CachedTokens {
		t.Fatalf("the client reads prompt %d, cached %d; billed prompt %d, cached %d: %s",
			answer.Usage.Prompt, answer.Usage.Details.Cached, e.Usage.PromptTokens, e.Usage.CachedTokens, b)
	}
}

// TestEmbeddingsAnswerSaysWhatIsBilled: an embeddings answer whose usage
// the gateway corrected before billing it (a count past usage.MaxCount,
// clamped) reached the client with the upstream's figure unchanged, as a
// non-streamed chat answer did before reportedAsBilled was read there
// too: 9,000,000,000,000,000 prompt tokens shown, 1,000,000,000 billed.
func TestEmbeddingsAnswerSaysWhatIsBilled(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m",`+
			`"usage":{"prompt_tokens":9000000000000000,"total_tokens":9000000000000000}}`)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "evil", Type: "openai", BaseURL: up.URL})
	})
	resp := st.post(t, "/v1/embeddings", `{"model":"evil/m","input":"hi"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if !usage.HasCorrection(e.Corrections, usage.CorrectionOverMax) {
		t.Fatalf("event %+v %q: want the count clamped", e.Usage, e.Corrections)
	}
	var answer struct {
		Usage struct {
			Prompt int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if answer.Usage.Prompt != e.Usage.PromptTokens {
		t.Fatalf("the client reads prompt %d; billed prompt %d: %s", answer.Usage.Prompt, e.Usage.PromptTokens, b)
	}
}
