package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// deep is a JSON value nested n arrays deep: deeper than the gateway's
// fast scanners follow (jsonscan.MaxDepth), well within what
// encoding/json, and so the gateway's fallback parse, accepts.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestAmbiguousKeyBehindDeepNestingIsRefused: the check that refuses a
// body whose model, stream, stream_options, include_usage or background
// is spelled twice or otherwise than exactly gave up, and let the body
// through, when a member before it was nested deeper than its scanner
// follows (a deep JSON schema, say), while the gateway's own parse
// (encoding/json) read the body all the same. A first member
// "background":true then "Background":false was read as false by the
// gateway and as true by an upstream that matches keys exactly: a
// background response, generated out of the gateway's sight and never
// billed. Such a body is refused, whatever its nesting.
func TestAmbiguousKeyBehindDeepNestingIsRefused(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "not expected", http.StatusTeapot)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "oai", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-oai-123456789"},
			gateway.ProviderConfig{Name: "ant", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"})
	})
	d := deep(80)
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"tools":` + d + `,"model":"oai/m","input":"hi","background":true,"Background":false}`},
		{"/v1/responses", `{"tools":` + d + `,"model":"oai/m","input":"hi","stream":true,"Stream":false}`},
		{"/anthropic/v1/messages", `{"tools":` + d + `,"model":"ant/m","max_tokens":9,"messages":[],"stream":true,"STREAM":false}`},
		{"/anthropic/v1/messages", `{"tools":` + d + `,"model":"ant/m","Model":"ant/n","max_tokens":9,"messages":[]}`},
		{"/v1/chat/completions", `{"tools":` + d + `,"model":"oai/m","stream":true,"\u017ftream_options":{"include_usage":false},"messages":[]}`},
		{"/v1/chat/completions", `{"model":"oai/m","stream":true,"stream_options":{"x":` + d + `,"include_usage":true,"Include_usage":false},"messages":[]}`},
		{"/v1/completions", `{"x":` + d + `,"model":"oai/m","MODEL":"oai/n","prompt":"hi"}`},
		{"/v1/embeddings", `{"x":` + d + `,"model":"oai/m","mod\u0065l":"oai/n","input":"hi"}`},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "ambiguous") {
			t.Errorf("%s %.200s: %d %s, want 400 naming the ambiguous member", tc.path, strings.ReplaceAll(tc.body, d, "<deep>"), resp.StatusCode, b)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// TestBearerSchemeInAnyCase: the Authorization scheme is case-insensitive
// (RFC 9110, section 11.1); a client that sent "bearer <key>" was told
// its key was missing.
func TestBearerSchemeInAnyCase(t *testing.T) {
	st := newStack(t, nil)
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER  "} {
		resp := st.post(t, "/v1/chat/completions", `{"model":"sim-pro","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", scheme+testKey)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%q: %d %s", scheme, resp.StatusCode, b)
		}
	}
}

// TestHugeAttributionDoesNotHideJournaledRequests: a request body's user
// and metadata (the end user and tags, cut to their bounds when the event
// is made) went into the crash journal's begin record whole. A body of a
// few MiB of them (under max_request_bytes) made a record larger than the
// journal's scan takes for sane, so that after a crash the scan stopped
// there: that request, and every request journaled after it, was never
// recovered, and never billed. The journal gets them cut, as the event
// will have them.
func TestHugeAttributionDoesNotHideJournaledRequests(t *testing.T) {
	dir := t.TempDir()
	j, _, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	st := newStack(t, nil)
	gw := startGateway(t, gateway.Config{Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
		Models: []gateway.ModelConfig{{Name: "sim-small", Provider: "sim"}}},
		gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: j})
	st.url = "http://" + gw.Addr()
	var tags strings.Builder
	tags.WriteString(`{"sim_delay_ms":"100"`)
	for i := range 3000 {
		fmt.Fprintf(&tags, `,"tag%d":"%s"`, i, strings.Repeat("v", 500))
	}
	tags.WriteString("}")
	huge := `{"model":"sim-small","stream":true,"max_tokens":20,"user":"` + strings.Repeat("u", 2<<20) + `",` +
		`"messages":[{"role":"user","content":"hi"}],"metadata":` + tags.String() + `}`
	normal := `{"model":"sim-small","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"100"}}`
	var ids []string
	for _, body := range []string{huge, normal} {
		resp := st.post(t, "/v1/chat/completions", body)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d", resp.StatusCode)
		}
		until(t, lines(resp.Body), `"content":"tok `) // in flight, journaled
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	var reqs []journal.Request
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		reqs = killSnapshot(t, dir)
		if len(reqs) >= 2 {
			break
		}
	}
	got := map[string]bool{}
	for _, e := range gw.Recover(reqs) {
		got[e.ID] = true
		if err := e.Validate(); err != nil {
			t.Errorf("recovered %s: %v", e.ID, err)
		}
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("request %s, in flight at the crash, not recovered (recovered %d requests)", id, len(reqs))
		}
	}
}

// TestDeepBodiesReachTheUpstream: a request nested deeper than the
// gateway's fast scanner reads (a deep JSON schema in its tools) was
// refused with 400 "jsonscan: not a JSON object" on the routes that set
// the model on the client's body (Anthropic's messages, Responses,
// embeddings), though it is one. It goes upstream with its model set.
func TestDeepBodiesReachTheUpstream(t *testing.T) {
	var got atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			io.WriteString(w, `{"type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			io.WriteString(w, `{"object":"response","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":1}}`)
		default:
			io.WriteString(w, `{"object":"list","data":[],"usage":{"prompt_tokens":3,"total_tokens":3}}`)
		}
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "oai", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-oai-123456789"},
			gateway.ProviderConfig{Name: "ant", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "deep-a", Provider: "ant", UpstreamModel: "claude-x"},
			gateway.ModelConfig{Name: "deep-o", Provider: "oai", UpstreamModel: "gpt-x"})
	})
	d := deep(80)
	for _, tc := range []struct{ path, body, want string }{
		{"/anthropic/v1/messages", `{"tools":` + d + `,"model":"deep-a","max_tokens":9,"messages":[]}`, `"model":"claude-x"`},
		{"/v1/responses", `{"tools":` + d + `,"model":"deep-o","input":"hi"}`, `"model":"gpt-x"`},
		{"/v1/embeddings", `{"x":` + d + `,"model":"deep-o","input":"hi"}`, `"model":"gpt-x"`},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sent, _ := got.Load().(string)
		if resp.StatusCode != http.StatusOK || !strings.Contains(sent, tc.want) || !strings.Contains(sent, d) {
			t.Errorf("%s: %d %s; the upstream got %.100s", tc.path, resp.StatusCode, b, sent)
			continue
		}
		if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Usage.PromptTokens != 3 {
			t.Errorf("%s: event usage %+v", tc.path, e.Usage)
		}
		got.Store("")
	}
}

// TestGeminiModelWithAColonIsRefused: on Gemini's native routes the model
// is in the path, and ":" separates its method. A model holding an
// escaped colon ("%3A") put two methods in the upstream's path: a request
// the gateway took for an unmetered countTokens went upstream as
// ".../models/m:generateContent:countTokens", and one it took for
// generateContent as ".../models/m:streamGenerateContent:generateContent",
// for the upstream to pick its method. Such a model is refused before
// any upstream call.
func TestGeminiModelWithAColonIsRefused(t *testing.T) {
	st := newStack(t, nil)
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	for _, path := range []string{
		"/gemini/v1beta/models/sim-gemini%2Fsim-pro:generateContent%3AcountTokens",
		"/gemini/v1beta/models/sim-gemini%2Fsim-pro%3AgenerateContent:countTokens",
		"/gemini/v1beta/models/sim-gemini%2Fsim-pro%3AstreamGenerateContent:generateContent",
	} {
		resp := st.post(t, path, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"status":"NOT_FOUND"`) {
			t.Errorf("%s: %d %s, want 404 in Gemini's envelope", path, resp.StatusCode, b)
		}
		// The answer says why, not only which paths exist.
		if !strings.Contains(string(b), "colon") {
			t.Errorf("%s: %s, want a message naming the colon in the model", path, b)
		}
	}
	if n := st.simStats(t).Requests.Total; n != 0 {
		t.Fatalf("upstream-sim saw %d requests, want none", n)
	}
}

// TestGeminiEmbeddingsEscapeAColon: /v1/embeddings on a Gemini provider
// put the model in the upstream's path with its colons as they are, so
// that a "provider/m:generateContent" model named two methods there
// (".../models/m:generateContent:embedContent"); it is escaped, as the
// chat translation escapes it.
func TestGeminiEmbeddingsEscapeAColon(t *testing.T) {
	var path atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path.Store(r.URL.EscapedPath())
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"embedding":{"values":[0.5]}}`)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "gp", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "gm-k"})
	})
	resp := st.post(t, "/v1/embeddings", `{"model":"gp/m:generateContent","input":"hi"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if p, _ := path.Load().(string); p != "/v1beta/models/m%3AgenerateContent:embedContent" {
		t.Fatalf("%d %s; the upstream path was %q", resp.StatusCode, b, p)
	}
}

// TestKeyHeadersReadInAFixedOrder: a request that sends a key in two of
// the providers' ways (x-api-key and x-goog-api-key) was authenticated
// by either, in the random order of a map: the same request got 401 or
// 200, and with two valid keys was billed to either customer. The ways
// are tried in the providers' order, the same every time.
func TestKeyHeadersReadInAFixedOrder(t *testing.T) {
	st := newStack(t, nil)
	statuses := map[int]int{}
	for range 30 {
		resp := st.post(t, "/v1/chat/completions", `{"model":"sim-pro","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
			"x-api-key", "tg-unknown", "x-goog-api-key", testKey)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if len(statuses) != 1 || statuses[http.StatusUnauthorized] != 30 {
		t.Fatalf("statuses %v: want the same answer every time, 401 (x-api-key, Anthropic's, comes first)", statuses)
	}
}

// TestSlowWholeAnswerIsServedAndBilled: a non-streamed answer's headers
// come with its body, once the provider has generated all of it. The
// gateway waited for them only connect_timeout (30s by default), so every
// non-streamed answer that took longer was cut off with 504 and billed
// nothing, though the provider generated (and billed) it; a client could
// pick that with stream:false and a large max_tokens. A whole answer gets
// stall_timeout; a stream's headers are still held to connect_timeout.
func TestSlowWholeAnswerIsServedAndBilled(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			holdOpen(r, 10*time.Second) // no headers
			return
		}
		time.Sleep(1500 * time.Millisecond) // generating the whole answer
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"a long answer"},`+
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5000,"total_tokens":5010}}`)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k-123456789",
			ConnectTimeout: time.Second, StallTimeout: time.Minute}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"write a lot"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != http.StatusOK || e.Status != usage.StatusOK || e.Usage.CompletionTokens != 5000 {
		t.Fatalf("%d %s; event %s %q %+v: want the answer, billed 5000 completion tokens", resp.StatusCode, b, e.Status, e.Error, e.Usage)
	}
	resp = st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); resp.StatusCode != http.StatusGatewayTimeout || e.Status != usage.StatusTimeout {
		t.Fatalf("stream without headers: %d %s, event %s; want 504 after connect_timeout", resp.StatusCode, b, e.Status)
	}
}

// TestAdminPathOnTheLLMListenerSaysWhereTheAdminAPIIs: an admin client or
// a browser pointed at the LLM listener (TOLLGATE_ADMIN_URL set to :8080,
// a natural slip) got "no route for GET /admin/v1/customers", which the
// CLI showed as "not found" (exit 3), as if the customer were missing.
// The answer names the admin listener.
func TestAdminPathOnTheLLMListenerSaysWhereTheAdminAPIIs(t *testing.T) {
	st := newStack(t, nil)
	for _, path := range []string{"/admin/v1/customers", "/console/", "/readyz", "/metrics"} {
		resp, err := http.Get(st.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "TOLLGATE_ADMIN_LISTEN") {
			t.Errorf("GET %s: %d %s; want 404 naming the admin listener", path, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(st.url + "/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), "TOLLGATE_ADMIN_LISTEN") {
		t.Errorf("GET /v1/nope: %d %s; want a plain 404", resp.StatusCode, b)
	}
}

// TestSDKBaseURLSlipSaysWhereTheRouteIs: an SDK given the gateway's root
// as its base URL (Anthropic's then posts /v1/messages, Gemini's
// /v1beta/models/…), OpenAI's given it without /v1 (/chat/completions)
// or with /v1 twice, got "no route for POST /v1/messages" and nothing
// more: a new user's first request, stuck on a 404. The answer names the
// route meant and the base URL each SDK takes.
func TestSDKBaseURLSlipSaysWhereTheRouteIs(t *testing.T) {
	st := newStack(t, nil)
	for path, want := range map[string]string{
		"/chat/completions":                         "/v1/chat/completions",
		"/embeddings":                               "/v1/embeddings",
		"/v1/v1/chat/completions":                   "/v1/chat/completions",
		"/v1/messages":                              "/anthropic/v1/messages",
		"/v1/messages/count_tokens":                 "/anthropic/v1/messages/count_tokens",
		"/v1beta/models/gemini-sim:generateContent": "/gemini/v1beta/models/gemini-sim:generateContent",
	} {
		resp := st.post(t, path, `{"model":"sim-pro","messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "did you mean POST "+want) || !strings.Contains(string(b), "base URL") {
			t.Errorf("POST %s: %d %s; want 404 naming POST %s and the SDKs' base URLs", path, resp.StatusCode, b, want)
		}
	}
	resp := st.post(t, "/v1/nope", `{}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), "did you mean") {
		t.Errorf("POST /v1/nope: %d %s; want a plain 404", resp.StatusCode, b)
	}
}
