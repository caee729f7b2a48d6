package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// deepMember is a member whose value is valid JSON nested 10,001 levels
// deep: past encoding/json's limit of 10,000, which Node's and Python's
// parsers do not share (a hostile upstream's review reproduced it).
var deepMember = `"x":` + strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat(`}`, 10001)

// TestDeeplyNestedEventsAreBilled: an upstream event that carries output
// to the client beside a member nested deeper than encoding/json reads was
// skipped by the tap, so a 400-word answer with no usage report was billed
// 0 or 1 completion tokens on the native routes and the Responses route.
// The chat route billed the deep member's 60 KB as output instead, and
// relayed a usage chunk so nested to a client that did not ask for usage,
// its report unread. Such an event is read as its shallow members, on
// every route.
func TestDeeplyNestedEventsAreBilled(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("ledger ", 400)) // about 400 tokens
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(typ, data string) {
			if typ != "" {
				_, _ = io.WriteString(w, "event: "+typ+"\n")
			}
			_, _ = io.WriteString(w, "data: "+data+"\n\n")
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			send("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-m","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}`)
			send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+words+`"},`+deepMember+`}`)
			send("content_block_stop", `{"type":"content_block_stop","index":0}`)
			send("message_stop", `{"type":"message_stop"}`)
		case strings.Contains(r.URL.Path, ":streamGenerateContent"):
			send("", `{"candidates":[{"content":{"role":"model","parts":[{"text":"`+words+`"}]},"index":0}],`+deepMember+`}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			send("response.created", `{"type":"response.created","response":{"id":"resp_1","status":"in_progress","model":"m"}}`)
			send("response.output_text.delta", `{"type":"response.output_text.delta","delta":"`+words+`",`+deepMember+`}`)
		case strings.HasPrefix(r.URL.Path, "/usage/"):
			send("", `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`)
			send("", `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7321,"total_tokens":7333},`+deepMember+`}`)
			send("", `[DONE]`)
		default:
			send("", `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"`+words+`"}}],`+deepMember+`}`)
			send("", `[DONE]`)
		}
	}))
	defer up.Close()
	st := newStack(t, everyType(up.URL, gateway.ProviderConfig{Name: "ou", Type: "openai", BaseURL: up.URL + "/usage/v1"}))
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"claude-m","max_tokens":900,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic as chat", "/v1/chat/completions", `{"model":"claude-m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"gemini native", "/gemini/v1beta/models/gemini-m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"gemini as chat", "/v1/chat/completions", `{"model":"gemini-m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := st.post(t, tc.path, tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Usage.CompletionTokens < 400 || e.Usage.CompletionTokens > 1000 {
				t.Errorf("client got %d (%d bytes); event %s %s %+v: want the 400 words that passed billed, not the deep member's bytes",
					resp.StatusCode, len(b), e.Status, e.UsageSource, e.Usage)
			}
		})
	}
	t.Run("chat usage chunk", func(t *testing.T) {
		resp := st.post(t, "/v1/chat/completions", `{"model":"mu","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if strings.Contains(string(b), "7321") {
			t.Errorf("a client that did not ask for usage was sent the usage chunk (%d bytes)", len(b))
		}
		if e.Usage.CompletionTokens != 7321 || e.UsageSource != usage.SourceUpstream {
			t.Errorf("event %s %s %+v: the usage chunk's 7,321 completion tokens were lost", e.Status, e.UsageSource, e.Usage)
		}
	})
}

// TestDeeplyNestedAnswersAreBilled: a whole (not streamed) answer with a
// member nested past encoding/json's 10,000 levels beside its own is read
// as its shallow members: its usage is the provider's, on every route.
func TestDeeplyNestedAnswersAreBilled(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-m","content":[{"type":"text","text":"hi"}],`+
				`"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":345},`+deepMember+`}`)
		case strings.Contains(r.URL.Path, ":generateContent"):
			_, _ = io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],`+
				`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":345,"totalTokenCount":357},`+deepMember+`}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			_, _ = io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"m","output":[{"type":"message","role":"assistant",`+
				`"content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":12,"output_tokens":345,"total_tokens":357},`+deepMember+`}`)
		default:
			_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},`+
				`"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":345,"total_tokens":357},`+deepMember+`}`)
		}
	}))
	defer up.Close()
	st := newStack(t, everyType(up.URL))
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"claude-m","max_tokens":900,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic as chat", "/v1/chat/completions", `{"model":"claude-m","messages":[{"role":"user","content":"hi"}]}`},
		{"gemini native", "/gemini/v1beta/models/gemini-m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"gemini as chat", "/v1/chat/completions", `{"model":"gemini-m","messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"m","input":"hi"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := st.post(t, tc.path, tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Usage.CompletionTokens != 345 || e.UsageSource != usage.SourceUpstream || resp.StatusCode != http.StatusOK {
				t.Errorf("client got %d (%d bytes); event %s %s %+v: want the answer's usage, 345 completion tokens",
					resp.StatusCode, len(b), e.Status, e.UsageSource, e.Usage)
			}
		})
	}
}
