package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// bodyUpstream answers every request with body, as Content-Type ct.
func bodyUpstream(t *testing.T, ct, body string) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestEmbeddingsCountsAsTheChatRouteReadsThem: /v1/embeddings decoded the
// upstream's usage into integers with encoding/json, so a count written
// 1000.0 or "1000" (which the chat route takes) failed the exchange: the
// client got a 502 for a complete answer, and was still billed an
// estimate. A negative count was clamped to zero and billed as the
// provider's figure. Now a count reads as it does on the chat route, and
// one that cannot be read (negative, fractional, beyond int64, another
// type) is no report: the input is estimated, and the client gets its
// answer.
func TestEmbeddingsCountsAsTheChatRouteReadsThem(t *testing.T) {
	for _, c := range []struct {
		usage  string
		want   int64 // prompt tokens billed; -1: estimated
		source usage.Source
	}{
		{`{"prompt_tokens":1000.0,"total_tokens":1000.0}`, 1000, usage.SourceUpstream},
		{`{"prompt_tokens":"1000","total_tokens":"1000"}`, 1000, usage.SourceUpstream},
		{`{"total_tokens":1e3}`, 1000, usage.SourceUpstream},
		{`{"prompt_tokens":1e30,"total_tokens":1e30}`, -1, usage.SourceEstimated},
		{`{"prompt_tokens":-1000,"total_tokens":-1000}`, -1, usage.SourceEstimated},
		{`{"prompt_tokens":12.5}`, -1, usage.SourceEstimated},
		{`"n/a"`, -1, usage.SourceEstimated},
	} {
		body := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m","usage":` + c.usage + `}`
		up := bodyUpstream(t, "application/json", body)
		st := newStack(t, oneUpstream(up.URL))
		resp := st.post(t, "/v1/embeddings", `{"model":"m","input":"the quick brown fox jumps over the lazy dog"}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if resp.StatusCode != http.StatusOK || e.Status != usage.StatusOK {
			t.Errorf("usage %s: client %d %.120s; event %s %q", c.usage, resp.StatusCode, b, e.Status, e.Error)
			continue
		}
		if e.UsageSource != c.source || c.want >= 0 && e.Usage.PromptTokens != c.want || c.want < 0 && e.Usage.PromptTokens <= 0 {
			t.Errorf("usage %s: event %d prompt tokens (%s), want %d (%s)", c.usage, e.Usage.PromptTokens, e.UsageSource, c.want, c.source)
		}
	}
}

// TestAnErrorBodyUnderA200IsNotBilled: an upstream's error object under a
// 200 (`{"error":{...}}`, no answer) was billed on /v1/embeddings and
// /v1/responses as a success, an estimate of the input charged, and
// embeddings wrote that estimate into the error body as its usage. As on
// the chat route, it is now an upstream error, billed nothing, and its body
// reaches the client as the upstream sent it.
func TestAnErrorBodyUnderA200IsNotBilled(t *testing.T) {
	const errBody = `{"error":{"message":"overloaded","type":"server_error"}}`
	up := bodyUpstream(t, "application/json", errBody)
	st := newStack(t, oneUpstream(up.URL))
	for _, c := range []struct{ path, body string }{
		{"/v1/embeddings", `{"model":"m","input":"the quick brown fox jumps over the lazy dog"}`},
		{"/v1/responses", `{"model":"m","input":"the quick brown fox jumps over the lazy dog"}`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"the quick brown fox"}]}`},
	} {
		resp := st.post(t, c.path, c.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusUpstreamError || e.Usage != (usage.Tokens{}) {
			t.Errorf("%s: event %s, usage %+v (%s), want upstream_error with nothing billed", c.path, e.Status, e.Usage, e.UsageSource)
		}
		if strings.Contains(string(b), "usage") || !strings.Contains(string(b), "overloaded") {
			t.Errorf("%s: client got %d %s, want the upstream's error body without usage", c.path, resp.StatusCode, b)
		}
	}
}

// clientUsages reads the usage of a JSON answer (or chunk) as two kinds of
// client read it: by the exact key "usage", the last when repeated
// (JavaScript's JSON.parse, Python's json), and as Go's encoding/json
// does (any key that folds to it, merged).
func clientUsages(t *testing.T, b []byte) (exact, folded map[string]any) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	_ = json.Unmarshal(m["usage"], &exact)
	var s struct {
		Usage map[string]any `json:"usage"`
	}
	_ = json.Unmarshal(b, &s)
	return exact, s.Usage
}

// TestUsageMembersDecodersReadDifferently: an upstream answer with a
// "usage" and a "Usage" member (or "usage" twice) was billed as
// encoding/json reads it (the later member, merged into the earlier),
// while the client's decoder read another: the answer showed 1000 prompt
// tokens and the cost of 1. The report is now the member spelled exactly
// "usage" (its last), and the client gets one usage member, the one
// billed, whichever way its decoder reads keys; on a stream, the usage
// chunk is made from the event.
func TestUsageMembersDecodersReadDifferently(t *testing.T) {
	const ambiguous = `"usage":{"prompt_tokens":1000,"completion_tokens":1000,"total_tokens":2000},"Usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`
	check := func(what string, e usage.Event, client []byte) {
		t.Helper()
		if e.Usage.PromptTokens != 1000 || e.UsageSource != usage.SourceUpstream {
			t.Errorf("%s: event %+v (%s), want the exact member's 1000 prompt tokens", what, e.Usage, e.UsageSource)
		}
		exact, folded := clientUsages(t, client)
		for _, u := range []map[string]any{exact, folded} {
			if u["prompt_tokens"] != float64(e.Usage.PromptTokens) || u["completion_tokens"] != float64(e.Usage.CompletionTokens) {
				t.Errorf("%s: a client reads usage %v, the event billed %+v: %s", what, u, e.Usage, client)
			}
		}
	}

	answer := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],` + ambiguous + `}`
	st := newStack(t, oneUpstream(bodyUpstream(t, "application/json", answer).URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check("chat answer", st.sink.event(t, resp.Header.Get("X-Request-Id")), b)

	emb := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}],"model":"m",` +
		`"usage":{"prompt_tokens":1000,"total_tokens":1000},"Usage":{"prompt_tokens":1,"total_tokens":1}}`
	st = newStack(t, oneUpstream(bodyUpstream(t, "application/json", emb).URL))
	resp = st.post(t, "/v1/embeddings", `{"model":"m","input":"hi"}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	exact, folded := clientUsages(t, b)
	if e.Usage.PromptTokens != 1000 || exact["prompt_tokens"] != float64(1000) || folded["prompt_tokens"] != float64(1000) {
		t.Errorf("embeddings: event %+v; a client reads %v or %v: %s", e.Usage, exact, folded, b)
	}

	stream := "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello there\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[]," + ambiguous + "}\n\n" +
		"data: [DONE]\n\n"
	st = newStack(t, oneUpstream(bodyUpstream(t, "text/event-stream", stream).URL))
	resp = st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var usageChunk []byte
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(strings.ToLower(d), `"usage"`) {
			if usageChunk != nil {
				t.Errorf("stream: more than one chunk carries usage: %s", b)
			}
			usageChunk = []byte(d)
		}
	}
	if usageChunk == nil {
		t.Fatalf("stream: no usage chunk: %s", b)
	}
	check("stream", st.sink.event(t, resp.Header.Get("X-Request-Id")), usageChunk)
}

// TestEmbeddingsInputSpelledTwiceIsRefused: on /v1/embeddings the gateway
// estimates the input it reads under "input", exactly, while a
// translated provider's request (Gemini's, whose embeddings report no
// usage, so that the estimate is the bill) was made from the body read by
// encoding/json, which takes "Input" as input too, the last one winning.
// {"input":"hi","Input":[a thousand texts]} had the upstream embed the
// thousand texts and the customer billed for "hi": 1 token. A body that
// spells the input twice, or otherwise than exactly, is refused as the
// other members the gateway acts on are, before anything goes upstream.
func TestEmbeddingsInputSpelledTwiceIsRefused(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		n := strings.Count(string(b), `"text"`)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"embeddings":[`+strings.TrimSuffix(strings.Repeat(`{"values":[0.1]},`, n), ",")+`]}`)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "g", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "gm-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "embed", Provider: "g"}}
	})
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", 20)
	many := `"` + text + `"` + strings.Repeat(`,"`+text+`"`, 999)
	for _, body := range []string{
		`{"model":"embed","input":"hi","Input":[` + many + `]}`,
		`{"model":"embed","input":"hi","INPUT":[` + many + `]}`,
		`{"model":"embed","Input":[` + many + `],"input":["hi"]}`,
		`{"model":"embed","input":"hi","inp\u0075t":[` + many + `]}`,
	} {
		resp := st.post(t, "/v1/embeddings", body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			t.Errorf("%.60s…: served, %d texts embedded upstream, billed %d prompt tokens (%s)",
				body, strings.Count(string(b), `"object":"embedding"`), e.Usage.PromptTokens, e.UsageSource)
			continue
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "ambiguous") {
			t.Errorf("%.60s…: %d %.200s; want 400 naming the ambiguous member", body, resp.StatusCode, b)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times; want none", n)
	}
}
