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

// How an OpenAI-compatible stream ends when the upstream does not say so.

// TestStreamHeldOpenAfterItsUsageChunkEnds (a review): an upstream that
// sends its finish chunk and usage chunk, then holds its body open with no
// [DONE] (DESIGN: some never send one; the stream ends at the finish
// chunk), held the client for stall_timeout (5 minutes by default), then
// the client got an error event the upstream never sent, and the request
// was recorded as a timeout. The stream now ends a second after its usage
// chunk: the usage chunk and [DONE], recorded ok.
func TestStreamHeldOpenAfterItsUsageChunkEnds(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hello there"}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer up.Close()
	defer close(release)
	st := newStack(t, func(c *gateway.Config) {
		oneUpstream(up.URL)(c)
		c.Providers[0].StallTimeout = 15 * time.Second
	})
	start := time.Now()
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || took > 10*time.Second || strings.Contains(string(b), "error") ||
		!strings.Contains(string(b), `"completion_tokens":2`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("after %s (%v) the client got\n%s\nwant the answer, the usage chunk and [DONE], about a second after the usage", took, err, b)
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage.PromptTokens != 5 || e.Usage.CompletionTokens != 2 {
		t.Fatalf("event %s %s %+v (%s), want ok with the provider's 5 + 2", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestClientGoneBeforeTheLastChoiceEndsIsReadToTheEnd (a review): with
// n = 2 and usage on every chunk (vLLM's continuous usage), the first
// choice's finish chunk made its report final, and a client that left then
// stopped the reading: 3 completion tokens recorded as the provider's
// figure, where the provider's own count at the end was 103. A report is
// taken as the last only in the usage chunk that follows every choice.
func TestClientGoneBeforeTheLastChoiceEndsIsReadToTheEnd(t *testing.T) {
	left := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		u := func(c int) string {
			return fmt.Sprintf(`,"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, c, 5+c)
		}
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]`+u(2)+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]`+u(3)+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-left:
		case <-time.After(10 * time.Second):
		}
		for i := range 100 {
			fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":1,"delta":{"content":"lorem "}}]`+u(4+i)+"\n\n")
		}
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":1,"delta":{},"finish_reason":"stop"}]`+u(103)+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[]`+u(103)+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","n":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	until(t, lines(resp.Body), "finish_reason")
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond) // the gateway sees the client gone
	close(left)
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Usage.CompletionTokens != 103 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want the provider's last count, 103 completion tokens", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestAUsageReportBeforeTheFinishDoesNotEndTheStream: a choices-less usage
// report before any finish reason (an upstream's progress report) is not
// the usage chunk that ends the stream: output after a pause of over a
// second still reaches the client, and the last report is billed.
func TestAUsageReportBeforeTheFinishDoesNotEndTheStream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"first "}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`+"\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(1500 * time.Millisecond)
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"after the pause"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "after the pause") {
		t.Fatalf("the client got\n%s\nwant the output after the pause", b)
	}
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusOK || e.Usage.CompletionTokens != 4 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v, want ok with the last report's 4 completion tokens", e.Status, e.UsageSource, e.Usage)
	}
}

// TestClientGoneAfterTheOnlyChoiceStopsTheReading (a review of the rule
// above): with one choice asked for (no n), a report in the finish chunk
// is the last, and a client gone by then no longer holds the upstream: a
// body held open after the finish chunk was read on to drain_timeout.
func TestClientGoneAfterTheOnlyChoiceStopsTheReading(t *testing.T) {
	upstreamLet := make(chan time.Time, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hello there"}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			upstreamLet <- time.Now()
		case <-time.After(30 * time.Second):
		}
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		oneUpstream(up.URL)(c)
		c.DrainTimeout = 30 * time.Second
		c.Providers[0].StallTimeout = 60 * time.Second
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	until(t, lines(resp.Body), "finish_reason")
	resp.Body.Close()
	left := time.Now()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Usage.CompletionTokens != 2 || e.Usage.PromptTokens != 5 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want the provider's 5 + 2", e.Status, e.UsageSource, e.Usage, e.Error)
	}
	select {
	case at := <-upstreamLet:
		if d := at.Sub(left); d > 10*time.Second {
			t.Fatalf("the upstream was let go %s after the client left; want at once (drain_timeout is 30 s)", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream was still held 20 s after the client left, its one choice finished and its usage known (drain_timeout 30 s)")
	}
}

// clientLeavesMidStream serves body, the upstream's stream, in two parts:
// before, then, once the client has read up to mark and left, after.
func clientLeavesMidStream(t *testing.T, path, request, mark, before, after string) usage.Event {
	t.Helper()
	left := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, before)
		w.(http.Flusher).Flush()
		select {
		case <-left:
		case <-time.After(10 * time.Second):
		}
		fmt.Fprint(w, after)
	}))
	defer up.Close()
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, path, request)
	until(t, lines(resp.Body), mark)
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond) // the gateway sees the client gone
	close(left)
	return st.sink.event(t, resp.Header.Get("X-Request-Id"))
}

// TestAProgressReportDoesNotEndAOneChoiceStream (a review): with one
// choice, a choices-less usage report before any finish reason (a
// progress report) was taken for the last, and a client that left after
// it cut the upstream off: 1 completion token billed as the provider's,
// of 400. One choice's report is the last only once it has finished.
func TestAProgressReportDoesNotEndAOneChoiceStream(t *testing.T) {
	u := func(c int) string {
		return fmt.Sprintf(`data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", c, 5+c)
	}
	e := clientLeavesMidStream(t, "/v1/chat/completions",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "first",
		`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"first "}}]}`+"\n\n"+u(1),
		`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"and the rest"},"finish_reason":"stop"}]}`+"\n\n"+u(400)+"data: [DONE]\n\n")
	if e.Usage.CompletionTokens != 400 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want the provider's last count, 400 completion tokens", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestClientGoneBeforeTheLastPromptEndsIsReadToTheEnd (a review): a
// legacy completions request with an array of prompts gets a choice for
// each, n absent; the first choice's finish chunk, usage on every chunk,
// was taken for the last report, and a client that left then cut the
// upstream off at 3 completion tokens of 103.
func TestClientGoneBeforeTheLastPromptEndsIsReadToTheEnd(t *testing.T) {
	u := func(c int) string {
		return fmt.Sprintf(`,"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, c, 5+c)
	}
	chunk := func(choices string, c int) string {
		return `data: {"id":"c","object":"text_completion","model":"m","choices":[` + choices + `]` + u(c) + "\n\n"
	}
	after := ""
	for i := range 100 {
		after += chunk(`{"index":1,"text":"lorem "}`, 4+i)
	}
	after += chunk(`{"index":1,"text":"","finish_reason":"stop"}`, 103) + chunk(``, 103) + "data: [DONE]\n\n"
	e := clientLeavesMidStream(t, "/v1/completions", `{"model":"m","stream":true,"prompt":["x","y"]}`, "finish_reason",
		chunk(`{"index":0,"text":"a"},{"index":1,"text":"b"}`, 2)+chunk(`{"index":0,"text":"","finish_reason":"stop"}`, 3), after)
	if e.Usage.CompletionTokens != 103 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want the provider's last count, 103 completion tokens", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

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
