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

// TestAnErrorFrameEndsTheStreamThoughTheUpstreamHoldsItOpen: a provider's
// error frame ends its stream (Anthropic's `event: error`; an OpenAI
// chunk with a top-level error, "[DONE] may or may not follow"). An
// upstream that then holds its body open held the client until
// stall_timeout (5 minutes by default), which was then sent a second error,
// a timeout the upstream never had; and the event recorded that timeout
// (status timeout, "upstream sent nothing within stall_timeout"), the
// provider's own error lost from the ledger. As after a usage chunk
// (errQuietAfterUsage), the stream should end a moment after the error
// frame, recorded as the provider's error.
func TestAnErrorFrameEndsTheStreamThoughTheUpstreamHoldsItOpen(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(r.URL.Path, "/messages") {
			_, _ = io.WriteString(w, anthEv("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`)+
				anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+
				anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)+
				anthEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		} else {
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`+"\n\n"+
				`data: {"error":{"message":"The server had an error while processing your request","type":"server_error"}}`+"\n\n")
		}
		_ = body
		w.(http.Flusher).Flush()
		select { // held open, as a misbehaving upstream or proxy does
		case <-r.Context().Done():
		case <-time.After(6 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{
			{Name: "op", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k", StallTimeout: 4 * time.Second},
			{Name: "ap", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k", StallTimeout: 4 * time.Second}}
		c.Models = []gateway.ModelConfig{{Name: "om", Provider: "op", UpstreamModel: "gpt-x"}, {Name: "cl", Provider: "ap", UpstreamModel: "claude-x"}}
	})
	for _, c := range []struct{ name, path, req, provider string }{
		{"openai chat", "/v1/chat/completions", `{"model":"om","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "The server had an error"},
		{"anthropic chat", "/v1/chat/completions", `{"model":"cl","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Overloaded"},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"cl","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Overloaded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			resp := st.post(t, c.path, c.req)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(t0)
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if took > 2500*time.Millisecond || strings.Contains(string(got), "stall_timeout") {
				t.Errorf("the client's stream ended %v after the request (stall_timeout 4s), and read:\n%s\nwant it ended soon after the provider's error, which is all it is told", took.Round(100*time.Millisecond), got)
			}
			if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, c.provider) {
				t.Errorf("event %s (%q), want upstream_error naming the provider's error", e.Status, e.Error)
			}
		})
	}
}
