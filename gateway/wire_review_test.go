package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestGeminiLoweredReportIsNotBilledBelowWhatTheClientRead: Gemini's
// usageMetadata is cumulative, so the output count never falls; an
// upstream whose last chunk reports fewer output tokens than a chunk
// before it (or leaves the count out, a chunk with promptTokenCount
// alone) was billed the last report: the client read 300 completion tokens in the stream and the
// ledger billed 3. The native Anthropic relay refuses such a lowered
// report (TestALoweredReportIsNotBilledBelowWhatTheClientRead); the
// cumulative Gemini path took it as the bill.
func TestGeminiLoweredReportIsNotBilledBelowWhatTheClientRead(t *testing.T) {
	first := `data: {"candidates":[{"content":{"parts":[{"text":"hello there friend"}],"role":"model"},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":300,"totalTokenCount":1300}}` + "\n\n"
	for name, last := range map[string]string{
		"lowered": `data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP"}],` +
			`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3,"totalTokenCount":13}}` + "\n\n",
		"prompt alone": `data: {"candidates":[],"usageMetadata":{"promptTokenCount":1000}}` + "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, e := scriptedNative(t, "gemini", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
				`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, first+last)
			if !strings.Contains(got, `"candidatesTokenCount":300`) {
				t.Fatalf("the client did not read the first report: %s", got)
			}
			// The prompt may fall (the recorded flash2-prompt-count-changes
			// stream: 15, 15, 13, the last billed); the output already
			// generated and reported cannot.
			if e.Usage.CompletionTokens < 300 {
				t.Fatalf("billed %+v (%s); the client read a report of 300 completion tokens", e.Usage, e.UsageSource)
			}
		})
	}
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
