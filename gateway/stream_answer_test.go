package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestANonStreamedRequestAnsweredWithAStream (an attacker's review): an
// upstream that ignored "stream": false and answered an SSE stream had its
// whole body read as one unreadable answer, and every byte of the framing
// estimated as output: 6,759 completion tokens for an answer of 150, the
// provider's own usage chunk ignored. The stream is read chunk by chunk,
// as the stream relay reads it: its usage billed when it has one, else the
// output of its chunks estimated. The client gets the body unchanged.
func TestANonStreamedRequestAnsweredWithAStream(t *testing.T) {
	content := chatEvent(`{"index":0,"delta":{"role":"assistant","content":""}}`) +
		strings.Repeat(chatEvent(`{"index":0,"delta":{"content":"lorem ipsum dolor sit amet "}}`), 30) +
		chatEvent(`{"index":0,"delta":{},"finish_reason":"stop"}`)
	usageChunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":150,"total_tokens":159}}` + "\n\n"
	// A report before the output (a review): a progress report, not the
	// bill; the output after it is counted, as on the stream relay.
	early := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "typed") {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		if strings.Contains(string(body), "early") {
			_, _ = io.WriteString(w, early+content+"data: [DONE]\n\n")
			return
		}
		if strings.Contains(string(body), "usage") {
			_, _ = io.WriteString(w, content+usageChunk+"data: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(w, content+"data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	st := oneProviderStack(t, "openai", up.URL)
	for _, input := range []string{"usage typed", "usage", "no report typed", "early report"} {
		e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+input+`"}]}`)
		if strings.Count(got, "lorem ipsum") != 30 || !strings.HasPrefix(got, "data: ") {
			t.Errorf("%s: the client got %q, want the upstream's stream", input, got)
		}
		if e.Status != usage.StatusOK || e.NotCharged || e.Usage.PromptTokens <= 0 {
			t.Errorf("%s: event %s %+v (%q), want ok, charged", input, e.Status, e.Usage, e.Error)
		}
		if strings.HasPrefix(input, "usage") {
			if e.UsageSource != usage.SourceUpstream || e.Usage.CompletionTokens != 150 || e.Usage.PromptTokens != 9 {
				t.Errorf("%s: billed %s %+v, want the provider's usage chunk, 9 + 150", input, e.UsageSource, e.Usage)
			}
			continue
		}
		// No report (or one before the output): the chunks' output, 30 ×
		// "lorem ipsum dolor sit amet ", about 6 tokens each, estimated;
		// not the framing's thousands, nor the early report's 1.
		want := usage.SourceEstimated
		if strings.HasPrefix(input, "early") {
			want = usage.SourcePartial
		}
		if e.UsageSource != want || e.Usage.CompletionTokens < 120 || e.Usage.CompletionTokens > 250 {
			t.Errorf("%s: billed %s %+v, want the output of the chunks estimated, about 180 tokens", input, e.UsageSource, e.Usage)
		}
	}
}
