package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Findings of a hostile-upstream review of the native routes (rv-wire).

// scriptedNative serves body, flushed, on a native stack of type typ, posts
// req to path, and returns what the client read and the request's event.
func scriptedNative(t *testing.T, typ, path, req, body string) (string, usage.Event) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	st := nativeStack(t, typ, up.URL, 5*time.Second)
	var resp *http.Response
	if typ == "anthropic" {
		resp = st.post(t, path, req, "x-api-key", testKey)
	} else {
		resp = st.post(t, path, req)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b), st.sink.event(t, resp.Header.Get("X-Request-Id"))
}

// TestAnthropicOverloadedAfterMessageStartBillsNothing: Anthropic's usual
// overload is a message_start, then an error event (overloaded_error)
// before any content. docs/billing.md: "An upstream that refused (an
// error frame before any output) ... bills nothing", as the Responses
// route does for response.created then error. The native Anthropic route
// billed message_start's figures as partial: the prompt and message_start's
// placeholder output token, for an answer the client never got.
func TestAnthropicOverloadedAfterMessageStartBillsNothing(t *testing.T) {
	for name, body := range map[string]string{
		"at once":    anthStart(1) + anthEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		"after ping": anthStart(1) + anthEv("ping", `{"type":"ping"}`) + anthEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			got, e := scriptedNative(t, "anthropic", "/anthropic/v1/messages", anthRequest, body)
			if !strings.Contains(got, "overloaded_error") {
				t.Fatalf("the client did not get the error: %s", got)
			}
			if e.Status != usage.StatusUpstreamError || e.Usage.Total() != 0 {
				t.Fatalf("event %s %s %+v; want upstream_error billing nothing (a refusal before any output)", e.Status, e.UsageSource, e.Usage)
			}
		})
	}
}

// TestNativeSSEUnderAJSONTypeIsReadAsAStream: an upstream (or a proxy in
// front of it) that labels a stream application/json sends SSE all the
// same. The chat route reads such a body as the stream it is
// (relayAnswerAsStream); the native routes read it as a whole JSON body,
// failed to, and billed its raw bytes as estimated output: 124 completion
// tokens and 1 prompt token, status upstream_error, for an Anthropic
// answer the provider reported as 10 prompt and 5 completion tokens and
// the client received whole.
func TestNativeSSEUnderAJSONTypeIsReadAsAStream(t *testing.T) {
	for _, tc := range []struct {
		typ, path, req, body string
		prompt, completion   int64
	}{
		{"anthropic", "/anthropic/v1/messages", anthRequest,
			anthStart(1) + anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello there"}}`) +
				anthDelta5 + anthEv("message_stop", `{"type":"message_stop"}`), 10, 5},
		{"gemini", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			`data: {"candidates":[{"content":{"parts":[{"text":"hello world"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":40}}` + "\n\n", 10, 40},
		{"openai", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}\n\n", 10, 2},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.body)
			}))
			defer up.Close()
			st := nativeStack(t, tc.typ, up.URL, 5*time.Second)
			resp := st.post(t, tc.path, tc.req, "x-api-key", testKey)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tc.body {
				t.Fatalf("the client got %q, want the upstream's bytes", b)
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream ||
				e.Usage.PromptTokens != tc.prompt || e.Usage.CompletionTokens != tc.completion {
				t.Fatalf("event %s %s %+v (%q); want ok, upstream, %d prompt and %d completion tokens",
					e.Status, e.UsageSource, e.Usage, e.Error, tc.prompt, tc.completion)
			}
		})
	}
}

// TestAnthropicContentWithAFieldOfAnotherTypeIsCounted: a content event
// whose text a client reads, but with another field of an unexpected type
// (an index written 0.0 or "0", a block's id a number), was
// dropped whole by the Anthropic tap: its text never reached the estimate.
// A stream that then broke was billed message_start's placeholder (1
// completion token) for about 1,000 tokens of text the client received.
// The chat and Responses routes count such events (TestChunksOfOtherField
// TypesAreCounted, TestResponsesFieldsOfOtherTypes).
func TestAnthropicContentWithAFieldOfAnotherTypeIsCounted(t *testing.T) {
	txt := strings.Repeat("lorem ipsum dolor sit amet ", 200)
	for name, ev := range map[string]string{
		"float index":  anthEv("content_block_delta", `{"type":"content_block_delta","index":0.0,"delta":{"type":"text_delta","text":"`+txt+`"}}`),
		"string index": anthEv("content_block_delta", `{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"`+txt+`"}}`),
		"block start":  anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"`+txt+`","id":7}}`),
	} {
		t.Run(name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, anthStart(1)+ev)
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the stream breaks
			}))
			defer up.Close()
			st := nativeStack(t, "anthropic", up.URL, 5*time.Second)
			resp := st.post(t, "/anthropic/v1/messages", anthRequest, "x-api-key", testKey)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), txt) {
				t.Fatalf("the client did not get the text")
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Usage.CompletionTokens < 500 {
				t.Fatalf("billed %+v (%s) for about 1,000 tokens of text the client received", e.Usage, e.UsageSource)
			}
		})
	}
}

// TestWholeBodyTrickledIsNotAStall: stall_timeout bounds the silence
// between two upstream events, but a whole body (Gemini's
// streamGenerateContent without alt=sse: one JSON array whose elements
// arrive as they are generated) was read under a stall timer nothing
// touched: an answer sending every 200 ms was cut at stall_timeout from
// its start, 504 to the client and a timeout event billing no output,
// for 800 tokens the upstream generated (and bills).
func TestWholeBodyTrickledIsNotAStall(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "[")
		for i := range 8 {
			if i > 0 {
				_, _ = io.WriteString(w, ",\r\n")
			}
			_, _ = io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"word "}],"role":"model"}`)
			if i == 7 {
				_, _ = io.WriteString(w, `,"finishReason":"STOP"`)
			}
			_, _ = io.WriteString(w, `}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":`+itoa((i+1)*100)+`}}`)
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "]")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "k", StallTimeout: 500 * time.Millisecond}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
	})
	resp := st.post(t, "/gemini/v1beta/models/m:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != http.StatusOK || e.Status != usage.StatusOK || e.Usage.CompletionTokens != 800 {
		t.Fatalf("%d %.120s; event %s %s %+v %q; want 200, ok, 800 completion tokens",
			resp.StatusCode, b, e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestAnthropicIterationsCannotBillBelowTheTopLevelUsage: with server-side
// compaction, usage.iterations[] lists every billed iteration and the
// top-level figures only the last one, so each sum is at least its
// top-level figure. The tap billed the sums whenever iterations[] had
// been sent, below a top-level figure the client read: iterations of
// null or {} (sums of 0: 900 prompt and 500 completion tokens read, an
// estimate of 1 and 2 billed), sums below the top level (500 read, 5
// billed), and a later message_delta without iterations[] (its
// output_tokens 500 read, the earlier sum of 5 billed).
func TestAnthropicIterationsCannotBillBelowTheTopLevelUsage(t *testing.T) {
	txt := anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello there"}}`)
	end := anthEv("message_stop", `{"type":"message_stop"}`)
	delta := func(usage string) string {
		return anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":`+usage+`}`)
	}
	for name, tc := range map[string]struct {
		body               string
		prompt, completion int64
	}{
		"null iteration":  {delta(`{"input_tokens":900,"output_tokens":500,"iterations":[null]}`), 900, 500},
		"empty iteration": {delta(`{"input_tokens":900,"output_tokens":500,"iterations":[{}]}`), 900, 500},
		"sums below":      {delta(`{"input_tokens":900,"output_tokens":500,"iterations":[{"input_tokens":10,"output_tokens":5}]}`), 900, 500},
		"later delta without iterations": {delta(`{"output_tokens":5,"iterations":[{"input_tokens":10,"output_tokens":5}]}`) +
			delta(`{"output_tokens":500}`), 10, 500},
	} {
		t.Run(name, func(t *testing.T) {
			got, e := scriptedNative(t, "anthropic", "/anthropic/v1/messages", anthRequest, anthStart(1)+txt+tc.body+end)
			if !strings.Contains(got, `"output_tokens":500`) {
				t.Fatalf("the client did not read the report: %s", got)
			}
			if e.Usage.PromptTokens < tc.prompt || e.Usage.CompletionTokens < tc.completion {
				t.Fatalf("billed %+v (%s); the client read %d prompt and %d completion tokens", e.Usage, e.UsageSource, tc.prompt, tc.completion)
			}
		})
	}
}

// TestNativeStreamAnswerToANonStreamedRequestIsReadAsAStream: an upstream
// that ignores "stream": false answers with SSE. The chat route reads such
// an answer chunk by chunk (tapStreamAnswer: read as one unreadable body,
// a stream's framing was billed as output, about 45 times its content);
// the native routes still billed its raw bytes as estimated output: 124
// completion tokens and 1 prompt token, status upstream_error, for an
// Anthropic answer the provider reported as 10 prompt and 5 completion
// tokens.
func TestNativeStreamAnswerToANonStreamedRequestIsReadAsAStream(t *testing.T) {
	for _, tc := range []struct {
		typ, path, req, body string
		prompt, completion   int64
	}{
		{"anthropic", "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			anthStart(1) + anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello there"}}`) +
				anthDelta5 + anthEv("message_stop", `{"type":"message_stop"}`), 10, 5},
		{"gemini", "/gemini/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			`data: {"candidates":[{"content":{"parts":[{"text":"hello world"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":40}}` + "\n\n", 10, 40},
		{"openai", "/v1/responses", `{"model":"m","input":"hi"}`,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}}\n\n", 10, 2},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			got, e := scriptedNative(t, tc.typ, tc.path, tc.req, tc.body)
			if got != tc.body {
				t.Fatalf("the client got %q, want the upstream's bytes", got)
			}
			if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream ||
				e.Usage.PromptTokens != tc.prompt || e.Usage.CompletionTokens != tc.completion {
				t.Fatalf("event %s %s %+v (%q); want ok, upstream, %d prompt and %d completion tokens",
					e.Status, e.UsageSource, e.Usage, e.Error, tc.prompt, tc.completion)
			}
		})
	}
}
