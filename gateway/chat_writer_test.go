package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// chatChunk is an OpenAI chat stream's content chunk of text.
func chatChunk(text string) string {
	return `data: {"id":"chatcmpl-w","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"` +
		text + `"},"finish_reason":null}]}` + "\n\n"
}

// TestChatStreamFlushesBeforeTheUpstreamSendsMore: what the upstream sent
// reaches the client while the upstream waits, before it sends more: the
// upstream here sends its next events only once the client has read the
// first. A relay that held its events until more came, or until the end,
// would leave the client (and so the upstream) waiting for ever. The
// stream's response headers are those of an SSE stream that no proxy
// should buffer or cache, with the upstream's rate-limit headers passed
// on; and every event reaches the client once.
func TestChatStreamFlushesBeforeTheUpstreamSendsMore(t *testing.T) {
	read := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Ratelimit-Remaining-Tokens", "4321")
		fmt.Fprint(w, chatChunk("first-part"))
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Second):
			return
		}
		fmt.Fprint(w, chatChunk("second-part")+
			`data: {"id":"chatcmpl-w","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"chatcmpl-w","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	st := oneProviderStack(t, "openai", up.URL)
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
		"X-Accel-Buffering": "no", "X-Ratelimit-Remaining-Tokens": "4321"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	ls := lines(resp.Body)
	got := until(t, ls, "first-part") // within 10 s: the upstream sends nothing more until then
	close(read)
	got = append(got, until(t, ls, "[DONE]")...)
	for l := range ls {
		got = append(got, l)
	}
	body := strings.Join(got, "\n")
	for _, s := range []string{"first-part", "second-part", `"finish_reason":"stop"`, `"choices":[]`, "[DONE]"} {
		if n := strings.Count(body, s); n != 1 {
			t.Errorf("%q reached the client %d times, want once:\n%s", s, n, body)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
		t.Errorf("the stream does not end with [DONE]:\n%s", body)
	}
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusOK || e.Usage.PromptTokens != 3 || e.Usage.CompletionTokens != 2 {
		t.Errorf("event %s %+v (%s), want ok with the upstream's 3 + 2", e.Status, e.Usage, e.Error)
	}
}

// TestChatStreamOutputIsSentBeforeTheEventIsDurable: of an upstream stream
// that came in one piece, its output (the header, content and finish)
// reaches the client while the sink is still making the event durable;
// only the usage chunk and [DONE] wait for it. Left in the writer's batch
// until after the commit, the whole answer waited for the publish.
func TestChatStreamOutputIsSentBeforeTheEventIsDurable(t *testing.T) {
	up := jsonUpstream(t, "text/event-stream", chatChunk("all-at-once")+
		`data: {"id":"chatcmpl-w","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
		`data: {"id":"chatcmpl-w","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n"+
		"data: [DONE]\n\n")
	st := oneProviderStack(t, "openai", up.URL)
	st.sink.holdEvents(t)
	answered := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, st.url+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			close(answered)
			return
		}
		answered <- resp
	}()
	var resp *http.Response
	select {
	case resp = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no response header within 10 s while the event was being made durable")
	}
	if resp == nil {
		t.Fatal("the request failed")
	}
	defer resp.Body.Close()
	ls := lines(resp.Body)
	got := until(t, ls, `"finish_reason":"stop"`) // the sink holds the event: this came before it was durable
	if body := strings.Join(got, "\n"); !strings.Contains(body, "all-at-once") || strings.Contains(body, `"usage"`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("before the event was durable the client got:\n%s", body)
	}
	st.sink.release()
	until(t, ls, "[DONE]")
}

// TestChatUsageChunkIsTheLaterReport: an upstream's usage chunk, held for
// the stream's end, is not what the client gets when a later chunk
// reports usage again: the client's usage chunk says what the event
// bills, the later report, whether the gateway read that chunk by its
// scanner or (a key with an escape) by encoding/json. Held, the earlier
// chunk told the client 1 completion token of the 2 billed.
func TestChatUsageChunkIsTheLaterReport(t *testing.T) {
	const head = `{"id":"chatcmpl-w","object":"chat.completion.chunk","created":7,"model":"m",`
	for name, key := range map[string]string{"scanned": `"system_fingerprint"`, "parsed": `"system_fing\u0065rprint"`} {
		t.Run(name, func(t *testing.T) {
			st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", chatChunk("hello")+
				"data: "+head+`"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n"+
				"data: "+head+key+`:"fp","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n"+
				"data: [DONE]\n\n").URL)
			e, body := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
			if e.Usage.PromptTokens != 3 || e.Usage.CompletionTokens != 2 {
				t.Fatalf("event %s %+v (%s), want the later report's 3 + 2", e.Status, e.Usage, e.Error)
			}
			data := dataLines(body)
			if len(data) < 2 || data[len(data)-1] != "[DONE]" {
				t.Fatalf("the stream does not end with [DONE]:\n%s", body)
			}
			last := decodeChunk(t, data[len(data)-2])
			u, _ := last["usage"].(map[string]any)
			if !isUsageChunk(last) || fmt.Sprint(u["completion_tokens"]) != "2" || fmt.Sprint(u["prompt_tokens"]) != "3" {
				t.Fatalf("the client's usage chunk is %v, want the billed 3 + 2:\n%s", last, body)
			}
			if n := strings.Count(body, `"usage"`); n != 1 {
				t.Fatalf("%d usage members reached the client, want 1 (in the usage chunk):\n%s", n, body)
			}
		})
	}
}
