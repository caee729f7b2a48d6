package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// chatEvent is an SSE event of an OpenAI chat.completion.chunk whose
// choices are rest.
func chatEvent(rest string) string {
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[` + rest + `]}` + "\n\n"
}

// TestStreamsWithoutTheirEndAreCut: an upstream that closes its stream
// cleanly after some output but before the protocol's end (no
// finish_reason, no usage report, no [DONE]; Anthropic's stream without
// its message_delta and message_stop) cut the answer short. Such a stream
// was recorded ok, its usage estimated, and the chat client was sent a
// [DONE] as if the answer were whole. It is recorded as a stream that
// broke is: upstream_error, the relayed output billed (estimated), the chat
// client told in an error chunk, the native client given every byte as it
// came. A stream that ends at its finish chunk without [DONE] (DESIGN:
// some providers never send it) stays a clean end.
func TestStreamsWithoutTheirEndAreCut(t *testing.T) {
	content := chatEvent(`{"index":0,"delta":{"role":"assistant","content":""}}`) +
		strings.Repeat(chatEvent(`{"index":0,"delta":{"content":"word "}}`), 10)
	finish := chatEvent(`{"index":0,"delta":{},"finish_reason":"stop"}`)
	usageChunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":10,"total_tokens":19}}` + "\n\n"
	openaiUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		switch in := string(body); {
		case strings.Contains(in, "finish-only"):
			_, _ = io.WriteString(w, content+finish)
		case strings.Contains(in, "finish-usage"):
			_, _ = io.WriteString(w, content+finish+usageChunk)
		default:
			_, _ = io.WriteString(w, content)
		}
	}))
	t.Cleanup(openaiUp.Close)

	aev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	messageStart := aev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",`+
		`"model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}`) +
		aev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		strings.Repeat(aev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}`), 10)
	messageEnd := aev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		aev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":10}}`) +
		aev("message_stop", `{"type":"message_stop"}`)
	anthropicUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(string(body), "whole") {
			_, _ = io.WriteString(w, messageStart+messageEnd)
			return
		}
		_, _ = io.WriteString(w, messageStart)
	}))
	t.Cleanup(anthropicUp.Close)

	openai := oneProviderStack(t, "openai", openaiUp.URL)
	for _, c := range []struct {
		input  string
		status usage.Status
		source usage.Source
	}{
		{"eof", usage.StatusUpstreamError, usage.SourceEstimated},
		{"finish-only", usage.StatusOK, usage.SourceEstimated},
		{"finish-usage", usage.StatusOK, usage.SourceUpstream},
	} {
		e, got := doRequest(t, openai, "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"`+c.input+`"}]}`)
		if n := strings.Count(got, `"content":"word "`); n != 10 {
			t.Errorf("%s: the client got %d deltas, want 10: %q", c.input, n, got)
		}
		if e.Status != c.status || e.UsageSource != c.source || e.NotCharged || e.Usage.CompletionTokens <= 0 {
			t.Errorf("%s: event %s %s %+v charged=%v (%q), want %s %s, charged", c.input, e.Status, e.UsageSource,
				e.Usage, !e.NotCharged, e.Error, c.status, c.source)
		}
		cut := c.status != usage.StatusOK
		if strings.Contains(e.Error, "cut short") != cut || strings.Contains(got, `"error"`) != cut {
			t.Errorf("%s: error %q, the client's stream %q: want the cut named in both only when cut", c.input, e.Error, got)
		}
	}

	anthropic := oneProviderStack(t, "anthropic", anthropicUp.URL)
	for _, c := range []struct {
		path, body string
		status     usage.Status
	}{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"cut"}]}`, usage.StatusUpstreamError},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"whole"}]}`, usage.StatusOK},
		{"/anthropic/v1/messages", `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"cut"}]}`, usage.StatusUpstreamError},
		{"/anthropic/v1/messages", `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"whole"}]}`, usage.StatusOK},
	} {
		e, got := doRequest(t, anthropic, c.path, c.body)
		if n := strings.Count(got, `word `); n != 10 {
			t.Errorf("%s %s: the client got %d deltas, want 10: %q", c.path, c.body, n, got)
		}
		if e.Status != c.status || e.NotCharged || e.Usage.PromptTokens != 9 || e.Usage.CompletionTokens <= 0 {
			t.Errorf("%s %s: event %s %s %+v charged=%v (%q), want %s, charged", c.path, c.body, e.Status, e.UsageSource,
				e.Usage, !e.NotCharged, e.Error, c.status)
		}
		if c.status != usage.StatusOK && !strings.Contains(e.Error, "cut short") {
			t.Errorf("%s %s: error %q, want the cut named", c.path, c.body, e.Error)
		}
		if strings.HasPrefix(c.path, "/anthropic/") && !strings.HasPrefix(got, "event: message_start") {
			t.Errorf("%s: the native client got %q, want the upstream's bytes", c.path, got)
		}
	}
}
