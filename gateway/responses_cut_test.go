package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestResponsesStreamWithoutItsEndIsCut: the Responses API ends every
// stream with response.completed, response.failed or response.incomplete
// (the usage rides on it). A stream whose body ended cleanly without one
// (EOF, or a [DONE] the protocol does not have) was recorded ok, its
// usage an estimate, as if it had completed. It is a stream cut short
// upstream: recorded as the chat route records a stream that broke
// (upstream_error, charged, the output relayed estimated), and the client
// still gets every byte the upstream sent.
func TestResponsesStreamWithoutItsEndIsCut(t *testing.T) {
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	output := ev("response.created", `,"response":{"id":"resp_1","status":"in_progress","model":"m"}`) +
		strings.Repeat(ev("response.output_text.delta", `,"delta":"word "`), 10)
	// The chat route's cut stream, the same output: its body breaks
	// (declared longer than what is sent).
	chatOutput := strings.Repeat(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"word "}}]}`+"\n\n", 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		switch in := string(body); {
		case strings.Contains(r.URL.Path, "chat"):
			w.Header().Set("Content-Length", "100000")
			_, _ = io.WriteString(w, chatOutput)
		case strings.Contains(in, "done"):
			_, _ = io.WriteString(w, output+"data: [DONE]\n\n")
		case strings.Contains(in, "incomplete"):
			_, _ = io.WriteString(w, output+ev("response.incomplete", `,"response":{"id":"resp_1","status":"incomplete","model":"m",`+
				`"usage":{"input_tokens":12,"output_tokens":10,"total_tokens":22}}`))
		default:
			_, _ = io.WriteString(w, output)
		}
	}))
	t.Cleanup(up.Close)
	st := oneProviderStack(t, "openai", up.URL)
	chat, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"eof"}]}`)
	if chat.Status != usage.StatusUpstreamError || chat.UsageSource != usage.SourceEstimated || chat.NotCharged {
		t.Fatalf("the chat route's cut stream: %s %s %+v (%s)", chat.Status, chat.UsageSource, chat.Usage, chat.Error)
	}
	for _, input := range []string{"eof", "done"} {
		e, got := doRequest(t, st, "/v1/responses", `{"model":"m","stream":true,"input":"`+input+`"}`)
		if strings.Count(got, `"delta":"word "`) != 10 {
			t.Errorf("%s: the client got %q, want every delta relayed", input, got)
		}
		if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "response.completed") || e.NotCharged {
			t.Errorf("%s: event %s (%q), want an upstream_error naming the missing end, charged", input, e.Status, e.Error)
		}
		if e.UsageSource != chat.UsageSource || e.Usage.CompletionTokens != chat.Usage.CompletionTokens || e.Usage.PromptTokens <= 0 {
			t.Errorf("%s: usage %+v (%s), want the relayed output estimated as the chat route's cut stream, %+v (%s)",
				input, e.Usage, e.UsageSource, chat.Usage, chat.UsageSource)
		}
	}
	// A stream that ends with its own end event is not cut.
	if e, _ := doRequest(t, st, "/v1/responses", `{"model":"m","stream":true,"input":"incomplete"}`); e.Status != usage.StatusOK ||
		e.UsageSource != usage.SourceUpstream || e.Usage.CompletionTokens != 10 {
		t.Errorf("response.incomplete: event %s %s %+v (%s), want ok with the provider's usage", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}
