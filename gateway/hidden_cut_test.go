package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// cancelAfter posts body to path on st with the stack's key, reads the
// response until want shows (not at all when want is ""), then hangs up;
// it returns the request's event.
func cancelAfter(t *testing.T, st *stack, path, body, want string) usage.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	if want != "" {
		until(t, lines(resp.Body), want)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	resp.Body.Close()
	return st.sink.event(t, id)
}

// holdOpen keeps an upstream handler's response open, sending nothing,
// until its request ends (the gateway gave up on it) or d has passed.
func holdOpen(r *http.Request, d time.Duration) {
	select {
	case <-r.Context().Done():
	case <-time.After(d):
	}
}

// TestCancelledReasoningStreamBillsHiddenReasoning: OpenAI's reasoning
// models stream no reasoning and report reasoning_tokens only in the final
// usage chunk. A client that disconnects mid-answer, from an upstream that
// then gives no usage before drain_timeout, was billed an estimate with 0
// reasoning tokens, though the provider bills the reasoning it spent
// before the first output token. It is now estimated as for a crash: the
// model's recent average of unseen reasoning (here 300, learnt from a
// stream that completed). A stream cancelled before any output adds none.
func TestCancelledReasoningStreamBillsHiddenReasoning(t *testing.T) {
	const chunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"o-m","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		switch {
		case strings.Contains(string(body), "unreported"): // an upstream that never reports usage
			io.WriteString(w, strings.Repeat(chunk, 10)+"data: [DONE]\n\n")
			return
		case strings.Contains(string(body), "empty report"): // a usage object that counts nothing
			io.WriteString(w, strings.Repeat(chunk, 10)+`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"o-m","choices":[],"usage":{}}`+"\n\ndata: [DONE]\n\n")
			return
		case strings.Contains(string(body), "complete"):
			io.WriteString(w, strings.Repeat(chunk, 10)+
				`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"o-m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":310,"total_tokens":322,"completion_tokens_details":{"reasoning_tokens":300}}}`+"\n\ndata: [DONE]\n\n")
			return
		case strings.Contains(string(body), "output"):
			io.WriteString(w, strings.Repeat(chunk, 10))
			w.(http.Flusher).Flush()
		}
		if strings.Contains(string(body), "none yet") {
			holdOpen(r, 300*time.Millisecond) // no output at all, then the end of the body
			return
		}
		holdOpen(r, 5*time.Second) // then nothing: no usage, until the gateway gives up its drain
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "o-m", Provider: "up"}}
		c.DrainTimeout = 200 * time.Millisecond
	})
	if e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"o-m","stream":true,"messages":[{"role":"user","content":"complete"}]}`); e.Usage.ReasoningTokens != 300 {
		t.Fatalf("the completed stream billed %+v, want its 300 reasoning tokens", e.Usage)
	}
	cancelled := func(content, want string) usage.Event {
		return cancelAfter(t, st, "/v1/chat/completions", `{"model":"o-m","stream":true,"messages":[{"role":"user","content":"`+content+`"}]}`, want)
	}
	e := cancelled("output", `"content":"word "`)
	if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceEstimated || e.Usage.ReasoningTokens != 300 ||
		e.Usage.CompletionTokens < 300+10 || !strings.Contains(e.Error, "300 reasoning tokens the model hides") {
		t.Fatalf("cancelled after output: %s (%q), %s usage %+v; want client_cancelled, estimated, 300 reasoning tokens within completion",
			e.Status, e.Error, e.UsageSource, e.Usage)
	}
	// Reasoning counts against the request's output limit: no more is
	// added than the limit leaves after the output counted (the estimate
	// is at least the model's median now, so a customer whose requests
	// reason little could otherwise be billed more than it asked for).
	e = cancelAfter(t, st, "/v1/chat/completions", `{"model":"o-m","stream":true,"max_completion_tokens":50,"messages":[{"role":"user","content":"output"}]}`, `"content":"word "`)
	if e.Usage.CompletionTokens != 50 || e.Usage.ReasoningTokens <= 0 || e.Usage.ReasoningTokens >= 50 {
		t.Fatalf("cancelled with max_completion_tokens 50: usage %+v; want 50 completion tokens, the reasoning what the output left", e.Usage)
	}
	if e := cancelled("none yet", ""); e.Usage.ReasoningTokens != 0 || e.Usage.CompletionTokens != 0 {
		t.Fatalf("no output: %s, usage %+v; want no reasoning added", e.Status, e.Usage)
	}
	// A stream that ends normally from an upstream that reports no usage
	// spent its reasoning all the same (docs/billing.md, estimated).
	e, _ = doRequest(t, st, "/v1/chat/completions", `{"model":"o-m","stream":true,"messages":[{"role":"user","content":"unreported"}]}`)
	if e.Status != usage.StatusOK || e.UsageSource != usage.SourceEstimated || e.Usage.ReasoningTokens != 300 || e.Usage.CompletionTokens < 300+10 {
		t.Fatalf("completed without usage: %s (%q), %s usage %+v; want ok, estimated, 300 reasoning tokens within completion",
			e.Status, e.Error, e.UsageSource, e.Usage)
	}
	// Nor does a usage object that counts nothing ("usage":{}): its
	// completion is estimated, and it said nothing of the reasoning (a code
	// review: it was billed less than no usage object at all).
	e, _ = doRequest(t, st, "/v1/chat/completions", `{"model":"o-m","stream":true,"messages":[{"role":"user","content":"empty report"}]}`)
	if e.UsageSource != usage.SourcePartial || e.Usage.ReasoningTokens != 300 || e.Usage.CompletionTokens < 300+10 {
		t.Fatalf("completed with an empty usage object: %s (%q), %s usage %+v; want partial, 300 reasoning tokens within completion",
			e.Status, e.Error, e.UsageSource, e.Usage)
	}
}

// TestCutGeminiStreamThatReportedNoThoughtsBillsNoHiddenReasoning: Gemini
// reports its usage, cumulative, on every chunk, thoughtsTokenCount
// included: the thinking is done before the first candidate, so a report
// after output that names no thoughts says the request spent none (a
// thinkingBudget of 0, or a prompt the model did not think about). When
// such a stream is cut short (the client left, drain_timeout ended it),
// addHiddenReasoning added the model's average of hidden thinking (learnt
// from other requests, of other customers, that did think), because it
// tested ReasoningTokens > 0 rather than whether the provider had
// reported: the customer was billed 300 reasoning tokens the provider
// never spent nor billed. (Found by review.)
func TestCutGeminiStreamThatReportedNoThoughtsBillsNoHiddenReasoning(t *testing.T) {
	const chunk = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"word "}]},"index":0}],` +
		`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"totalTokenCount":17},"modelVersion":"m"}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if strings.Contains(string(body), "complete") {
			io.WriteString(w, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"word word"}]},"finishReason":"STOP","index":0}],`+
				`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":10,"thoughtsTokenCount":300,"totalTokenCount":322},"modelVersion":"m"}`+"\n\n")
			return
		}
		io.WriteString(w, strings.Repeat(chunk, 3))
		w.(http.Flusher).Flush()
		holdOpen(r, 5*time.Second) // then nothing, until the gateway gives up its drain
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "k-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
		c.DrainTimeout = 200 * time.Millisecond
	})
	const path = "/gemini/v1beta/models/m:streamGenerateContent?alt=sse"
	if e, _ := doRequest(t, st, path, `{"contents":[{"role":"user","parts":[{"text":"complete"}]}]}`); e.Usage.ReasoningTokens != 300 {
		t.Fatalf("the completed stream billed %+v (%s), want its 300 reasoning tokens", e.Usage, e.UsageSource)
	}
	e := cancelAfter(t, st, path, `{"contents":[{"role":"user","parts":[{"text":"cut"}]}]}`, `word `)
	if e.UsageSource != usage.SourcePartial {
		t.Fatalf("cut stream: %s usage %+v, want partial (the provider reported)", e.UsageSource, e.Usage)
	}
	if e.Usage.ReasoningTokens != 0 || e.Usage.CompletionTokens > 10 {
		t.Fatalf("cut stream: %s (%q), %s usage %+v; the provider's own cumulative report (5 candidates, no thoughts) "+
			"covers everything spent, yet the model's average hidden reasoning was added", e.Status, e.Error, e.UsageSource, e.Usage)
	}
}

// TestCutResponsesStreamWithReasoningSummaryBillsHiddenReasoning: on the
// Responses API a reasoning model streams, at most, a summary of its
// reasoning (reasoning.summary "auto"): a few dozen tokens standing for the
// hundreds it spent and the provider bills. The tap counted the summary as
// shown reasoning (ReasoningShown), so addHiddenReasoning added nothing
// for a stream cut short after output: a customer who asked for a summary,
// and left mid-answer from an upstream that gave no usage within
// drain_timeout, was billed the summary's handful of tokens instead of the
// model's 300 hidden reasoning tokens that the same request without a
// summary is billed. (Found by review.)
func TestCutResponsesStreamWithReasoningSummaryBillsHiddenReasoning(t *testing.T) {
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, ev("response.created", `,"response":{"id":"resp_1","status":"in_progress","model":"o-m"}`))
		if strings.Contains(string(body), "summary") {
			io.WriteString(w, ev("response.reasoning_summary_text.delta", `,"delta":"Thinking briefly."`))
		}
		io.WriteString(w, strings.Repeat(ev("response.output_text.delta", `,"delta":"word "`), 10))
		if strings.Contains(string(body), "complete") {
			io.WriteString(w, ev("response.completed", `,"response":{"id":"resp_1","status":"completed","model":"o-m",`+
				`"usage":{"input_tokens":12,"output_tokens":310,"output_tokens_details":{"reasoning_tokens":300},"total_tokens":322}}`))
			return
		}
		w.(http.Flusher).Flush()
		holdOpen(r, 5*time.Second) // then nothing, until the gateway gives up its drain
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "o-m", Provider: "up"}}
		c.DrainTimeout = 200 * time.Millisecond
	})
	if e, _ := doRequest(t, st, "/v1/responses", `{"model":"o-m","stream":true,"input":"complete"}`); e.Usage.ReasoningTokens != 300 {
		t.Fatalf("the completed stream billed %+v (%s), want its 300 reasoning tokens", e.Usage, e.UsageSource)
	}
	plain := cancelAfter(t, st, "/v1/responses", `{"model":"o-m","stream":true,"input":"cut"}`, `word `)
	summary := cancelAfter(t, st, "/v1/responses",
		`{"model":"o-m","stream":true,"input":"cut","reasoning":{"effort":"high","summary":"auto"}}`, `word `)
	if plain.Usage.ReasoningTokens != 300 {
		t.Fatalf("cut stream without a summary: %s %+v, want the 300 hidden reasoning tokens", plain.UsageSource, plain.Usage)
	}
	if summary.Usage.ReasoningTokens < 300 || summary.Usage.CompletionTokens < plain.Usage.CompletionTokens {
		t.Fatalf("cut stream with a reasoning summary: %s (%q), %s usage %+v; the same stream without one bills %+v: "+
			"asking for a summary escapes the hidden reasoning", summary.Status, summary.Error, summary.UsageSource, summary.Usage, plain.Usage)
	}
}
