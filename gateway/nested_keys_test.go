package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPromptObjectKeySpelledTwiceIsRefused: the chat route refuses
// "messages" spelled twice, but the estimate reads each message (and its
// content parts) with encoding/json too, without regard to case, the last
// one winning: {"role":"user","content":[1,000 words],"Content":"hi"}
// went to an OpenAI upstream, which reads "content", and a stream cut
// short before its usage report was billed the estimate of "hi" (8 prompt
// tokens). So with the Responses API's input items. Such a body is
// refused before any upstream call; a JSON schema whose properties differ
// only in case (in tools, counted as written) is still served.
func TestPromptObjectKeySpelledTwiceIsRefused(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("ledger ", 1000))
	chunk := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ok"}}]}` + "\n\n"
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n"
	for _, c := range []struct{ name, path, body, stream string }{
		{"chat message content", "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"` + words + `","Content":"hi"}]}`, chunk},
		{"chat content part text", "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"` + words + `","TEXT":"hi"}]}]}`, chunk},
		{"responses item content", "/v1/responses",
			`{"model":"m","stream":true,"input":[{"role":"user","content":"` + words + `","Content":"hi"}]}`, delta},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, c.stream)
			}))
			t.Cleanup(up.Close)
			st := oneProviderStack(t, "openai", up.URL)
			resp := st.post(t, c.path, c.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "ambiguous") && calls.Load() == 0 {
				return
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			t.Fatalf("served %d (upstream called %d times), billed %d prompt tokens (%s) for a prompt of about 1,000 sent upstream; want 400 naming the ambiguous member",
				resp.StatusCode, calls.Load(), e.Usage.PromptTokens, e.UsageSource)
		})
	}
	t.Run("schema properties", func(t *testing.T) {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, chunk+"data: [DONE]\n\n")
		}))
		t.Cleanup(up.Close)
		st := oneProviderStack(t, "openai", up.URL)
		resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],`+
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"id":{"type":"string"},"ID":{"type":"string"}}}}}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a tool schema with properties id and ID: %d %s; want 200", resp.StatusCode, b)
		}
	})
}

// TestNativePromptObjectKeySpelledTwiceIsRefused: as on the chat route,
// the Anthropic and Gemini estimates read each message, block and part by
// encoding/json, without regard to case, while the provider reads the
// exact key: {"type":"text","text":[1,000 words],"TEXT":"hi"} sent the
// long prompt, and a stream cut short was billed the estimate of "hi".
// Objects the estimate counts as written (a tool_use block's input, a
// functionResponse's response: a tool's own JSON, where "Content-Type"
// and "content-type" may both be) are not the gateway's to refuse.
func TestNativePromptObjectKeySpelledTwiceIsRefused(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("ledger ", 1000))
	anth := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"
	gem := "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"ok\"}]}}]}\n\n"
	const anthPath, gemPath = "/anthropic/v1/messages", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse"
	for _, c := range []struct {
		name, typ, path, body, stream string
		served                        bool
	}{
		{"anthropic block text", "anthropic", anthPath,
			`{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"` + words + `","TEXT":"hi"}]}]}`, anth, false},
		{"anthropic message content", "anthropic", anthPath,
			`{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"` + words + `","Content":"hi"}]}`, anth, false},
		{"gemini part text", "gemini", gemPath,
			`{"contents":[{"role":"user","parts":[{"text":"` + words + `","Text":"hi"}]}]}`, gem, false},
		{"anthropic tool input", "anthropic", anthPath,
			`{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"id":1,"ID":2}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`, anth, true},
		{"gemini function response", "gemini", gemPath,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1,"A":2}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"Content-Type":"a","content-type":"b"}}}]}]}`, gem, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, c.stream)
			}))
			t.Cleanup(up.Close)
			st := oneProviderStack(t, c.typ, up.URL)
			resp := st.post(t, c.path, c.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			refused := resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "ambiguous") && calls.Load() == 0
			switch {
			case c.served && resp.StatusCode != http.StatusOK:
				t.Fatalf("a tool's own JSON with keys one in case: %d %s; want it served", resp.StatusCode, b)
			case !c.served && !refused:
				e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
				t.Fatalf("served %d (upstream called %d times), billed %d prompt tokens (%s) for a prompt of about 1,000 sent upstream; want 400 naming the ambiguous member",
					resp.StatusCode, calls.Load(), e.Usage.PromptTokens, e.UsageSource)
			}
		})
	}
}

// TestResponsesInputMapsOfTheirOwnAreServed: a Responses input item may
// carry a map of the client's or a tool's own, whose keys may differ only
// in case (a local shell call's env: http_proxy and HTTP_PROXY): such a
// request is served, as OpenAI serves it.
func TestResponsesInputMapsOfTheirOwnAreServed(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n")
	}))
	t.Cleanup(up.Close)
	st := oneProviderStack(t, "openai", up.URL)
	resp := st.post(t, "/v1/responses", `{"model":"m","stream":true,"input":[{"role":"user","content":"hi"},`+
		`{"type":"local_shell_call","id":"l","call_id":"c","status":"completed","action":{"type":"exec","command":["ls"],"env":{"http_proxy":"a","HTTP_PROXY":"a"}}},`+
		`{"type":"local_shell_call_output","call_id":"c","output":"ok"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a local shell call's env with http_proxy and HTTP_PROXY: %d %s; want it served", resp.StatusCode, b)
	}
}
