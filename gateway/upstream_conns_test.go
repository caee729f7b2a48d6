package gateway_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// doneStream is a whole OpenAI chat stream: one content chunk, the usage
// chunk (3 prompt and 1 completion tokens) and [DONE].
const doneStream = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" +
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n" +
	"data: [DONE]\n\n"

// connCountingUpstream serves doneStream, flushed, then runs after (which
// decides when the body ends); it counts the connections it accepted.
func connCountingUpstream(t *testing.T, after func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, doneStream)
		w.(http.Flusher).Flush()
		after(w, r)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	return up, &conns
}

// streamThrough sends n streamed chat completions, one after another, to
// the model "m" of st, reads each to its end, and checks each was billed
// the upstream's usage.
func streamThrough(t *testing.T, st *stack, n int) {
	t.Helper()
	for i := range n {
		resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "data: [DONE]\n\n") || strings.Contains(string(b), "AFTER") {
			t.Fatalf("stream %d: %d %q %v", i, resp.StatusCode, b, err)
		}
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage.PromptTokens != 3 || e.Usage.CompletionTokens != 1 {
			t.Fatalf("stream %d: event %s %s %+v, want ok, reported, 3 prompt and 1 completion tokens", i, e.Status, e.UsageSource, e.Usage)
		}
	}
}

func oneUpstream(url string) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "openai", BaseURL: url + "/v1", APIKey: "sk-up-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
	}
}

// TestStreamsKeepTheirUpstreamConnection: an upstream's handler ends the
// body (the chunked encoding's last chunk) after it has flushed [DONE], in
// a packet of its own. The gateway stops relaying at [DONE], and net/http
// keeps a connection for the next request only if its body was read to the
// end; so the gateway reads on to it, and streams one after another share
// one upstream connection instead of dialing one each. (The gateway waits
// afterDoneWait, 10 ms, for the end, so on a machine loaded enough to delay
// the upstream's 2 ms by more than that a stream may dial again: up to 3 of
// 10 are allowed; without the reading on, every stream dials.)
func TestStreamsKeepTheirUpstreamConnection(t *testing.T) {
	up, conns := connCountingUpstream(t, func(http.ResponseWriter, *http.Request) { time.Sleep(2 * time.Millisecond) })
	st := newStack(t, oneUpstream(up.URL))
	streamThrough(t, st, 10)
	if n := conns.Load(); n > 3 {
		t.Fatalf("10 streams one after another opened %d upstream connections, want 1 (at most 3 on a loaded machine)", n)
	}
}

// TestAnUpstreamThatHoldsItsBodyOpenAfterDone: an upstream that sends
// [DONE] and then neither ends its body nor closes the connection does not
// hold the client's stream: the gateway waits a moment for the body's end,
// then closes that connection, and the next stream dials another.
func TestAnUpstreamThatHoldsItsBodyOpenAfterDone(t *testing.T) {
	up, conns := connCountingUpstream(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	st := newStack(t, oneUpstream(up.URL))
	streamThrough(t, st, 3)
	if n := conns.Load(); n != 3 {
		t.Fatalf("3 streams opened %d upstream connections, want 3 (each held one open after [DONE])", n)
	}
}

// TestWhatFollowsDoneIsNotRelayed: a chunk an upstream sends after
// [DONE], before its body ends, reaches neither the client nor the bill,
// and the connection still serves the next stream.
func TestWhatFollowsDoneIsNotRelayed(t *testing.T) {
	extra := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"AFTER"}}],"usage":{"prompt_tokens":300,"completion_tokens":100,"total_tokens":400}}` + "\n\n"
	up, conns := connCountingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		// A write of its own after [DONE]'s flush, the body's end at once
		// after it: a 2 ms sleep before it, under a load average of 20
		// (.ci/run beside helpers), outlasted afterDoneWait (10 ms) in 3
		// streams of 6, which then dialed again.
		_, _ = io.WriteString(w, extra)
	})
	st := newStack(t, oneUpstream(up.URL))
	streamThrough(t, st, 6) // checks the usage of each, and the end of its body
	if n := conns.Load(); n > 2 {
		t.Fatalf("6 streams opened %d upstream connections, want 1 (at most 2 on a loaded machine: see TestStreamsKeepTheirUpstreamConnection)", n)
	}
}
