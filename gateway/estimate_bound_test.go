package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEstimateWithinTheOutputLimit (a review): a stream whose usage the
// provider never reports is billed the tokenizer's count of its text, and
// o200k_base counts another model's text in more tokens than the model's
// own tokenizer may: 200 words streamed under max_tokens 20 billed 200
// completion tokens, where the provider, which stops at its limit, bills
// 20. The estimate is now at most the stated limit times the choices, on a
// stream that completed and on one the client cut; a request that states
// no limit is billed what was counted, and a provider's own report is
// never lowered.
func TestEstimateWithinTheOutputLimit(t *testing.T) {
	chunk := func(text string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Repeat(chunk("word "), 200))
		switch {
		case strings.Contains(string(body), "reported"): // the provider's own count, above the limit
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":150,"total_tokens":155}}`+"\n\n")
		case strings.Contains(string(body), "hang"):
			w.(http.Flusher).Flush()
			holdOpen(r, 5*time.Second)
			return
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
		c.DrainTimeout = 200 * time.Millisecond
	})
	for _, tc := range []struct {
		name, fields, content string
		want                  int64
		source                usage.Source
	}{
		{"max_tokens 20", `"max_tokens":20,`, "hi", 20, usage.SourceEstimated},
		{"max_completion_tokens 30", `"max_completion_tokens":30,`, "hi", 30, usage.SourceEstimated},
		{"max_tokens 20, n 3", `"max_tokens":20,"n":3,`, "hi", 60, usage.SourceEstimated},
		{"no limit", ``, "hi", 200, usage.SourceEstimated},
		{"a limit above the output", `"max_tokens":1000,`, "hi", 200, usage.SourceEstimated},
		{"the provider's own count", `"max_tokens":20,`, "reported", 150, usage.SourceUpstream},
	} {
		e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,`+tc.fields+`"messages":[{"role":"user","content":"`+tc.content+`"}]}`)
		// 200 "word " deltas are 201 tokens to o200k_base: what was counted
		// is billed whole when no limit is below it.
		if got := e.Usage.CompletionTokens; got != tc.want && (tc.want != 200 || got != 201) || e.UsageSource != tc.source {
			t.Errorf("%s: %s usage %+v; want %d completion tokens, %s", tc.name, e.UsageSource, e.Usage, tc.want, tc.source)
		}
	}
	e := cancelAfter(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hang"}]}`, `"content":"word "`)
	if e.Status != usage.StatusClientCancelled || e.Usage.CompletionTokens != 20 {
		t.Errorf("cut by the client under max_tokens 20: %s usage %+v; want client_cancelled, 20 completion tokens", e.Status, e.Usage)
	}
}

// TestRecoveredEstimateWithinTheOutputLimit: a crashed request's output,
// counted from its journal, is billed at most its stated output limit, as
// the same request cut short is.
func TestRecoveredEstimateWithinTheOutputLimit(t *testing.T) {
	st := newStack(t, nil)
	body := []byte(`{"model":"sim-small","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
	out := []byte(strings.Repeat("word ", 200))
	now := time.Now()
	e := begun("0197a3c2-0000-7000-8000-0000000000b1", "/v1/chat/completions")
	got := st.gw.Recover([]journal.Request{{Event: e, Body: body, BodyLen: len(body), Output: out, OutputLen: len(out),
		Checkpoints: 2, Began: now, Last: now.Add(100 * time.Millisecond)}})
	if u := got[0].Usage; u.CompletionTokens != 20 {
		t.Errorf("recovered crash under max_tokens 20 of 200 words: %+v; want 20 completion tokens", u)
	}
	unlimited := []byte(`{"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	got = st.gw.Recover([]journal.Request{{Event: e, Body: unlimited, BodyLen: len(unlimited), Output: out, OutputLen: len(out),
		Checkpoints: 2, Began: now, Last: now.Add(100 * time.Millisecond)}})
	if u := got[0].Usage; u.CompletionTokens != 201 { // o200k_base's count of the 200 words
		t.Errorf("recovered crash of 200 words with no limit: %+v; want the 201 tokens counted", u)
	}
}
