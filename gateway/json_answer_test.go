package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// jsonUpstream answers every request with body under contentType, whatever
// the request asked for (as an upstream that ignores "stream" does).
func jsonUpstream(t *testing.T, contentType, body string) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil // no Content-Type at all, not one sniffed
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	return up
}

// streamChunks reads a chat stream's data payloads, up to and with [DONE].
func streamChunks(t *testing.T, resp *http.Response) []string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

const openAIAnswer = `{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"gpt-x",
 "choices":[{"index":0,"message":{"role":"assistant","content":"the whole answer"},"finish_reason":"stop"}],
 "usage":{"prompt_tokens":21,"completion_tokens":340,"total_tokens":361,"prompt_tokens_details":{"cached_tokens":5},
  "completion_tokens_details":{"reasoning_tokens":100}}}`

// TestStreamAnsweredWithABody: an OpenAI-compatible upstream that answers
// a stream request with a whole chat.completion body (it ignored
// "stream":true) was read as SSE: no events, an empty stream to the client
// and an event billed no completion tokens. The body is now billed from its
// usage, and the client gets the stream it asked for: the answer as one
// chunk, the usage chunk, [DONE].
func TestStreamAnsweredWithABody(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
		up := jsonUpstream(t, ct, openAIAnswer)
		st := newStack(t, oneUpstream(up.URL))
		resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
		if got := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || got != "text/event-stream" {
			t.Fatalf("%s: %d %s, want 200 text/event-stream", ct, resp.StatusCode, got)
		}
		id := resp.Header.Get("X-Request-Id")
		chunks := streamChunks(t, resp)
		if len(chunks) != 3 || chunks[2] != "[DONE]" {
			t.Fatalf("%s: chunks %q, want the answer, the usage chunk and [DONE]", ct, chunks)
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(chunks[0]), &c); err != nil || c.Object != "chat.completion.chunk" ||
			len(c.Choices) != 1 || c.Choices[0].Delta.Content != "the whole answer" || c.Usage != nil {
			t.Fatalf("%s: first chunk %s (%v): want the answer as a chunk's delta, without usage", ct, chunks[0], err)
		}
		var u struct {
			Usage struct {
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(chunks[1]), &u); err != nil || u.Usage.CompletionTokens != 340 {
			t.Fatalf("%s: usage chunk %s (%v): want 340 completion tokens", ct, chunks[1], err)
		}
		e := st.sink.event(t, id)
		want := usage.Tokens{PromptTokens: 21, CachedTokens: 5, CompletionTokens: 340, ReasoningTokens: 100}
		if e.Usage != want || e.UsageSource != usage.SourceUpstream || e.Status != usage.StatusOK {
			t.Fatalf("%s: event %+v %s %s, want %+v from the provider, ok", ct, e.Usage, e.UsageSource, e.Status, want)
		}
	}
}

// TestLegacyCompletionStreamAnsweredWithABody: the same on /v1/completions,
// whose answer and chunks are both text_completion objects.
func TestLegacyCompletionStreamAnsweredWithABody(t *testing.T) {
	up := jsonUpstream(t, "application/json", `{"id":"cmpl-x","object":"text_completion","created":1,"model":"m",
		"choices":[{"index":0,"text":"once upon a time","finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":77,"total_tokens":81}}`)
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/completions", `{"model":"m","stream":true,"prompt":"tell me"}`)
	id := resp.Header.Get("X-Request-Id")
	chunks := streamChunks(t, resp)
	if len(chunks) != 2 || !strings.Contains(chunks[0], `"text":"once upon a time"`) || strings.Contains(chunks[0], "usage") || chunks[1] != "[DONE]" {
		t.Fatalf("chunks %q: want the answer without usage (not asked for), then [DONE]", chunks)
	}
	if e := st.sink.event(t, id); e.Usage.CompletionTokens != 77 || e.Usage.PromptTokens != 4 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %+v %s, want 4 + 77 from the provider", e.Usage, e.UsageSource)
	}
}

// TestStreamAnsweredWithAnUnlabelledBody: docs/billing.md, "An upstream
// that does not stream": a body with no SSE event in it, whatever its
// Content-Type, is billed from its usage and the client still gets a
// stream. Only an application/json label was recognised: an
// OpenAI-compatible upstream sending its whole answer as
// text/event-stream, text/plain or with no Content-Type had the raw JSON
// written into the client's stream, was billed an estimate of the prompt
// and 0 completion tokens, and an error body was recorded as status ok.
func TestStreamAnsweredWithAnUnlabelledBody(t *testing.T) {
	for _, ct := range []string{"text/event-stream", "", "text/plain"} {
		t.Run("answer "+ct, func(t *testing.T) {
			st := newStack(t, oneUpstream(jsonUpstream(t, ct, openAIAnswer).URL))
			e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			want := usage.Tokens{PromptTokens: 21, CachedTokens: 5, CompletionTokens: 340, ReasoningTokens: 100}
			if e.Usage != want || e.UsageSource != usage.SourceUpstream {
				t.Errorf("billed %+v (%s), want %+v from the body's usage", e.Usage, e.UsageSource, want)
			}
			for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
				if l != "" && !strings.HasPrefix(l, "data: ") {
					t.Errorf("the client's stream has a line that is not SSE: %q", l)
					break
				}
			}
		})
		t.Run("pretty-printed legacy completion "+ct, func(t *testing.T) {
			st := newStack(t, oneUpstream(jsonUpstream(t, ct, "\n{\n  \"id\": \"cmpl-x\",\n  \"object\": \"text_completion\",\n"+
				"  \"choices\": [{\"index\": 0, \"text\": \"once\", \"finish_reason\": \"length\"}],\n\n"+
				"  \"usage\": {\"prompt_tokens\": 4, \"completion_tokens\": 77, \"total_tokens\": 81}\n}\n").URL))
			e, got := doRequest(t, st, "/v1/completions", `{"model":"m","stream":true,"prompt":"tell me"}`)
			if e.Usage.PromptTokens != 4 || e.Usage.CompletionTokens != 77 || !strings.Contains(got, `"text":"once"`) {
				t.Errorf("billed %+v (%s), want 4 + 77; the client got %s", e.Usage, e.UsageSource, got)
			}
		})
		t.Run("error "+ct, func(t *testing.T) {
			st := newStack(t, oneUpstream(jsonUpstream(t, ct, `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`).URL))
			e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			if e.Status == usage.StatusOK || e.Error == "" || e.Usage.PromptTokens != 0 {
				t.Errorf("an error body was recorded as status %s, error %q, billed %+v (%s); the client got:\n%s", e.Status, e.Error, e.Usage, e.UsageSource, got)
			}
		})
	}
}

// TestStreamAnsweredWithAnErrorBody: a 200 whose JSON body is an error
// object reaches the stream's client as the error event it is, and the
// event records the error.
func TestStreamAnsweredWithAnErrorBody(t *testing.T) {
	up := jsonUpstream(t, "application/json", `{"error":{"message":"overloaded, key sk-up-123456789","type":"server_error"}}`)
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	id := resp.Header.Get("X-Request-Id")
	chunks := streamChunks(t, resp)
	if len(chunks) != 2 || !strings.Contains(chunks[0], `"error"`) || strings.Contains(chunks[0], "sk-up-123456789") {
		t.Fatalf("chunks %q: want the error, scrubbed of the provider's key, then [DONE]", chunks)
	}
	if e := st.sink.event(t, id); e.Error == "" || strings.Contains(e.Error, "sk-up-123456789") {
		t.Fatalf("event error %q: want the upstream's error, scrubbed", e.Error)
	}
}

// TestStreamAnsweredWithANonAnswerBillsNothing: an upstream that answers
// a chat stream request 200 with a JSON object that is no answer (no
// choices, no usage, no error member: "{}", a proxy's {"detail":...})
// was billed its bytes as output, and its prompt estimated, though none of
// it reaches the client, who gets the gateway's error event in its place:
// `{"detail":"Not Found"}` billed 12 + 6 tokens here. As an error object under
// a 200 (README: upstream_error, nothing billed), it bills nothing.
func TestStreamAnsweredWithANonAnswerBillsNothing(t *testing.T) {
	for _, body := range []string{`{}`, `{"detail":"Not Found"}`, `{"object":"chat.completion","model":"m"}`,
		`{"error":{"message":"bad role","type":"invalid_request_error"}}`} {
		t.Run(body, func(t *testing.T) {
			up := jsonUpstream(t, "application/json", body)
			st := newStack(t, oneUpstream(up.URL))
			resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`)
			id := resp.Header.Get("X-Request-Id")
			chunks := streamChunks(t, resp)
			if resp.StatusCode != http.StatusOK || len(chunks) != 2 || !strings.Contains(chunks[0], `"error"`) || chunks[1] != "[DONE]" {
				t.Fatalf("client got %d %q: want an error event, then [DONE]", resp.StatusCode, chunks)
			}
			e := st.sink.event(t, id)
			if e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 || e.Error == "" {
				t.Fatalf("event %s (%q), usage %+v (%s), not charged %v: want an upstream_error billing nothing",
					e.Status, e.Error, e.Usage, e.UsageSource, e.NotCharged)
			}
		})
	}
}

// TestBodyThatIsNoAnswerBillsNothing: the same JSON object that is no
// answer, under a 200 to a non-streamed chat request, was recorded ok and
// billed its prompt, estimated (12 tokens here), and the client got it
// with a usage the gateway wrote in, as if it were an answer. As a stream
// request's (TestStreamAnsweredWithANonAnswerBillsNothing) and an error
// object under a 200, it is an upstream_error that bills nothing, and the
// client gets the body as the upstream sent it.
func TestBodyThatIsNoAnswerBillsNothing(t *testing.T) {
	for _, body := range []string{`{}`, `{"detail":"Not Found"}`} {
		t.Run(body, func(t *testing.T) {
			up := jsonUpstream(t, "application/json", body)
			st := newStack(t, oneUpstream(up.URL))
			resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Say hello to the ledger"}]}`)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(got) != body {
				t.Fatalf("client got %d %s: want the body as the upstream sent it", resp.StatusCode, got)
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 || e.Error == "" {
				t.Fatalf("event %s (%q), usage %+v (%s): want an upstream_error billing nothing", e.Status, e.Error, e.Usage, e.UsageSource)
			}
		})
	}
}

// TestSSEUnderAJSONType: a stream mislabelled application/json is still
// read as the stream it is, and billed from its usage chunk.
func TestSSEUnderAJSONType(t *testing.T) {
	up := jsonUpstream(t, "application/json",
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9,\"total_tokens\":12}}\n\n"+
			"data: [DONE]\n\n")
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	id := resp.Header.Get("X-Request-Id")
	chunks := streamChunks(t, resp)
	if len(chunks) != 2 || !strings.Contains(chunks[0], "hello") || chunks[1] != "[DONE]" {
		t.Fatalf("chunks %q", chunks)
	}
	if e := st.sink.event(t, id); e.Usage.CompletionTokens != 9 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %+v %s, want 9 completion tokens from the provider", e.Usage, e.UsageSource)
	}
}

const anthropicAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
 "content":[{"type":"text","text":"the whole answer"}],"stop_reason":"end_turn",
 "usage":{"input_tokens":12,"cache_read_input_tokens":30,"cache_creation_input_tokens":8,"output_tokens":250}}`

// TestAnthropicStreamAnsweredWithABody: Anthropic, translated to chat
// completions and on its native /anthropic/v1/messages, answering a stream request
// with a whole message. Natively, the bytes reach the client unchanged and
// were billed nothing, whether labelled JSON or not labelled at all; they
// are now billed from the message's usage. Translated, the client gets
// the stream it asked for, whatever the body's Content-Type.
func TestAnthropicStreamAnsweredWithABody(t *testing.T) {
	want := usage.Tokens{PromptTokens: 50, CachedTokens: 30, CacheWriteTokens: 8, CompletionTokens: 250}
	for _, ct := range []string{"application/json", "", "text/event-stream"} {
		up := jsonUpstream(t, ct, anthropicAnswer)
		st := newStack(t, func(c *gateway.Config) {
			c.Providers = []gateway.ProviderConfig{{Name: "a", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789",
				StallTimeout: 2 * time.Second}}
			c.Models = []gateway.ModelConfig{{Name: "m", Provider: "a"}}
		})
		resp := st.post(t, "/anthropic/v1/messages", `{"model":"m","stream":true,"max_tokens":300,"messages":[{"role":"user","content":"hi"}]}`)
		id := resp.Header.Get("X-Request-Id")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "the whole answer") {
			t.Fatalf("native, %q: %d %s", ct, resp.StatusCode, b)
		}
		if e := st.sink.event(t, id); e.Usage != want || e.UsageSource != usage.SourceUpstream {
			t.Errorf("native, %q: event %+v %s, want %+v from the provider", ct, e.Usage, e.UsageSource, want)
		}
		resp = st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		id = resp.Header.Get("X-Request-Id")
		chunks := streamChunks(t, resp)
		if len(chunks) != 2 || !strings.Contains(chunks[0], `"delta":{`) || !strings.Contains(chunks[0], "the whole answer") {
			t.Fatalf("translated: chunks %q", chunks)
		}
		if e := st.sink.event(t, id); e.Usage != want || e.UsageSource != usage.SourceUpstream {
			t.Errorf("translated: event %+v %s, want %+v from the provider", e.Usage, e.UsageSource, want)
		}
	}
}

// TestAnswerWithFieldsOfOtherTypesIsBilledFromItsUsage (a review): a whole
// chat answer was read strictly, so one whose "created" is a float
// (Python's time.time()), whose counts are written 900.0, or whose content
// is an array of parts, was filed as an upstream error and estimated (8
// prompt tokens for the provider's 900), while the same fields in a
// stream's chunks are read leniently. The answer is now billed from its
// usage and relayed; asked as a stream, the client gets the answer, not
// an error event.
func TestAnswerWithFieldsOfOtherTypesIsBilledFromItsUsage(t *testing.T) {
	const (
		floatCreated = `{"id":"c","object":"chat.completion","created":1700000000.5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there."},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":2,"total_tokens":902}}`
		floatCounts  = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there."},"finish_reason":"stop"}],"usage":{"prompt_tokens":900.0,"completion_tokens":2,"total_tokens":902}}`
		parts        = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"Hi there."}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":2,"total_tokens":902}}`
	)
	want := usage.Tokens{PromptTokens: 900, CompletionTokens: 2}
	for name, body := range map[string]string{"float created": floatCreated, "float counts": floatCounts, "content parts": parts} {
		up := jsonUpstream(t, "application/json", body)
		st := newStack(t, oneUpstream(up.URL))
		resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hi there.") {
			t.Fatalf("%s: %d %s, want the answer relayed", name, resp.StatusCode, b)
		}
		if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Usage != want || e.UsageSource != usage.SourceUpstream || e.Status != usage.StatusOK {
			t.Fatalf("%s: event %+v %s %s (%s), want %+v from the provider, ok", name, e.Usage, e.UsageSource, e.Status, e.Error, want)
		}

		resp = st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
		id := resp.Header.Get("X-Request-Id")
		chunks := streamChunks(t, resp)
		if len(chunks) != 3 || !strings.Contains(chunks[0], "Hi there.") || strings.Contains(chunks[0], "error") || chunks[2] != "[DONE]" {
			t.Fatalf("%s: stream %q, want the answer as a chunk, the usage chunk, [DONE]", name, chunks)
		}
		if e := st.sink.event(t, id); e.Usage != want || e.UsageSource != usage.SourceUpstream || e.Status != usage.StatusOK {
			t.Fatalf("%s, as a stream: event %+v %s %s (%s), want %+v from the provider, ok", name, e.Usage, e.UsageSource, e.Status, e.Error, want)
		}
	}
}
