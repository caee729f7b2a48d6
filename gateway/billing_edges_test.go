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

// TestChatRefusesAnAmbiguousStreamKey: /v1/chat/completions reads
// "stream" by its exact key, but passes every other member upstream; an
// upstream that matches keys as Go's encoding/json does (upstream-sim,
// Ollama, LocalAI...) reads "Stream":true and streams. The gateway took
// the SSE body for a JSON completion, relayed it whole to the client, and
// billed an estimate with no completion tokens. Such a body is now refused
// (400), as /v1/completions and /v1/embeddings refuse it.
func TestChatRefusesAnAmbiguousStreamKey(t *testing.T) {
	st := newStack(t, nil)
	for _, key := range []string{"Stream", "STREAM", "\u017ftream"} { // ſ folds to s in encoding/json
		before := st.simStats(t)
		resp := st.post(t, "/v1/chat/completions", `{"model":"sim-pro","`+key+`":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "ambiguous") {
			continue // refused, as /v1/completions does
		}
		after := st.simStats(t)
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		billed := after.CompletionTokens - before.CompletionTokens
		if e.Usage.CompletionTokens < billed {
			t.Errorf("%q:true: client got %d (%s, %d bytes, %d chunks); the upstream billed %d completion tokens, the event %d (%s)",
				key, resp.StatusCode, resp.Header.Get("Content-Type"), len(b), strings.Count(string(b), "data: "),
				billed, e.Usage.CompletionTokens, e.UsageSource)
		}
	}
}

// TestUnreadableChatBodyIsBilledAnEstimate: an OpenAI-compatible
// upstream's 200 answer to a non-streamed chat completion that the gateway
// cannot parse is relayed to the client as it is; it was billed zero
// completion tokens. Like passBody (TestUnreadableBodyIsBilledAnEstimate),
// relayChatBody now estimates the bytes it relayed, never nothing.
func TestUnreadableChatBodyIsBilledAnEstimate(t *testing.T) {
	answer := strings.Repeat("the whole answer, in no format the gateway reads. ", 40)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	defer up.Close()
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"write me a long essay"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != http.StatusOK || string(b) != answer {
		t.Fatalf("client: %d %.80s", resp.StatusCode, b)
	}
	if e.Usage.CompletionTokens == 0 {
		t.Fatalf("the client got %d bytes of answer; the event: status %s, source %s, usage %+v, error %q: want the relayed bytes estimated, never nothing",
			len(b), e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestAmbiguousStreamOptionsAreRefused: the gateway always asks the
// upstream for usage (stream_options.include_usage true), and the client's
// members go upstream in sorted key order. "ſtream_options" (U+017F, which
// encoding/json folds to "s") sorts after "stream_options", so an upstream
// matching keys as encoding/json does took the client's
// {"include_usage":false}: it reported no usage, and the stream was billed
// an estimate instead of the upstream's figures; "include_uſage" inside
// stream_options did the same. Chat and legacy completions now refuse both.
func TestAmbiguousStreamOptionsAreRefused(t *testing.T) {
	st := newStack(t, nil)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := `{"model":"sim-pro","stream":true,"\u017ftream_options":{"include_usage":false},"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`
		if path == "/v1/completions" {
			body = `{"model":"sim-pro","stream":true,"\u017ftream_options":{"include_usage":false},"max_tokens":20,"prompt":"hi"}`
		}
		before := st.simStats(t)
		resp := st.post(t, path, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "ambiguous") {
			continue
		}
		after := st.simStats(t)
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.UsageSource != usage.SourceUpstream {
			t.Errorf("%s: %d; event: %d prompt, %d completion tokens (%s); the upstream billed %d prompt, %d completion",
				path, resp.StatusCode, e.Usage.PromptTokens, e.Usage.CompletionTokens, e.UsageSource,
				after.PromptTokens-before.PromptTokens, after.CompletionTokens-before.CompletionTokens)
		}
	}
}

// TestAnthropicStreamEndsAtMessageStop: the chat relay ends an OpenAI
// stream at [DONE], but a stream translated from Anthropic was read to the
// body's end even after message_stop, Anthropic's own end. An upstream
// that held its body open after message_stop kept the client waiting for
// [DONE] until stall_timeout (5 min by default), then sent it an
// upstream_timeout error after a complete answer, and recorded the event
// as a timeout. The relay now ends at message_stop.
func TestAnthropicStreamEndsAtMessageStop(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`,
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
			`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`,
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
		} {
			_, _ = io.WriteString(w, ev+"\n\n")
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body is not ended
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "a", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789",
			StallTimeout: 2 * time.Second}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "a"}}
	})
	t0 := time.Now()
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	ls := lines(resp.Body)
	got := until(t, ls, "[DONE]")
	waited := time.Since(t0)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if strings.Contains(strings.Join(got, "\n"), `"error"`) || e.Status != usage.StatusOK || e.Usage.CompletionTokens != 7 {
		t.Fatalf("[DONE] came %v after the request (message_stop was sent at once); event %s %q %+v; the client read:\n%s",
			waited.Round(time.Millisecond), e.Status, e.Error, e.Usage, strings.Join(got, "\n"))
	}
	// The native route passes the stream through, and ends it there too.
	resp = st.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	e = st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if err != nil || !strings.HasSuffix(string(b), `data: {"type":"message_stop"}`+"\n\n") || e.Status != usage.StatusOK || e.Usage.CompletionTokens != 7 {
		t.Fatalf("native route: %v; event %s %q %+v; the client read:\n%s", err, e.Status, e.Error, e.Usage, b)
	}
}

// TestUsageChunkMatchesTheEvent: the event takes the upstream's last
// usage report, but the usage chunk a client that asked for usage got was
// the last choices-less chunk, which a later report on a content chunk did
// not replace: the client was told 1 completion token and billed 90.
func TestUsageChunkMatchesTheEvent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"more"}}],"usage":{"prompt_tokens":3,"completion_tokens":90,"total_tokens":93}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	want := fmt.Sprintf(`"completion_tokens":%d`, e.Usage.CompletionTokens)
	if !strings.Contains(string(b), want) {
		t.Fatalf("event: %+v (%s); the client was told otherwise:\n%s", e.Usage, e.UsageSource, b)
	}
}

// TestResponsesStreamEndsAtItsLastEvent: a Responses API upstream that
// sends response.completed and then holds its body open held the client's
// stream until stall_timeout, and the finished answer became a timeout.
// response.completed is the stream's last event: the relay ends there.
func TestResponsesStreamEndsAtItsLastEvent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`event: response.created` + "\n" + `data: {"type":"response.created","response":{"id":"resp_1","status":"in_progress","model":"m"}}`,
			`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","delta":"hi"}`,
			`event: response.completed` + "\n" + `data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","model":"m",` +
				`"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}}`,
		} {
			_, _ = io.WriteString(w, ev+"\n\n")
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body is not ended
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "o", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789",
			StallTimeout: 2 * time.Second}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "o"}}
	})
	t0 := time.Now()
	resp := st.post(t, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	waited := time.Since(t0)
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if err != nil || waited > time.Second || e.Status != usage.StatusOK || e.Usage.CompletionTokens != 7 {
		t.Fatalf("the stream ended %v after the request (response.completed was sent at once): %v; event %s %q %+v; the client read:\n%s",
			waited.Round(time.Millisecond), err, e.Status, e.Error, e.Usage, b)
	}
}
