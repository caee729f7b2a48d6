package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnthropicStreamHeldOpenAfterItsFinalReportEnds: an Anthropic upstream
// that sends message_delta (its final report: the stop reason and the
// output count) and then holds its body open, message_stop never sent,
// ends a second after the report, as an OpenAI stream held open after
// its usage chunk does (TestStreamHeldOpenAfterItsUsageChunkEnds): the
// client gets the answer and the report, the event is ok with the
// provider's figures. Only the protocol's end may follow the report, and
// it did not come: the client waited stall_timeout (5 minutes by
// default), for an error the provider never sent, and the event said
// timeout (a review of hostile upstreams). On the native route and on
// the chat route's translation alike.
func TestAnthropicStreamHeldOpenAfterItsFinalReportEnds(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, anthStart(1)+
			anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+
			anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello there"}}`)+
			anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`)+
			anthDelta5)
		w.(http.Flusher).Flush()
		for { // pings, as Anthropic sends them, but never message_stop
			select {
			case <-r.Context().Done():
				return
			case <-release:
				return
			case <-time.After(300 * time.Millisecond):
				fmt.Fprint(w, anthEv("ping", `{"type":"ping"}`))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer up.Close()
	defer close(release)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789",
			StallTimeout: 15 * time.Second}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
	})
	for _, c := range []struct{ path, body, want string }{
		{"/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"output_tokens":5`},
		{"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			`"completion_tokens":5`},
	} {
		start := time.Now()
		resp := st.post(t, c.path, c.body, "x-api-key", testKey)
		cut := time.AfterFunc(10*time.Second, func() { resp.Body.Close() }) // pings hold it to request_timeout
		b, err := io.ReadAll(resp.Body)
		cut.Stop()
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || took > 9*time.Second || strings.Contains(string(b), "error") || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: after %s (%v) the client got\n%s\nwant the answer and the report, about a second after the report", c.path, took, err, b)
		}
		if err != nil {
			continue // its event comes at request_timeout
		}
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage.PromptTokens != 10 || e.Usage.CompletionTokens != 5 {
			t.Errorf("%s: event %s %s %+v (%s), want ok with the provider's 10 + 5", c.path, e.Status, e.UsageSource, e.Usage, e.Error)
		}
	}
}
