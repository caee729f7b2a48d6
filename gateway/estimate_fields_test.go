package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEstimatedPromptCountsEveryFieldTheModelReads: with no usage from
// the upstream, the prompt is estimated from the request; text a client
// put in the Responses API's instructions, tools or text format, or in a
// chat message's name, an assistant refusal, response_format or
// prediction, counted nothing (an attacker review: 1,000 words there, an
// estimate of 1 to 17 tokens).
func TestEstimatedPromptCountsEveryFieldTheModelReads(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/responses") {
			_, _ = io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n")
			return
		}
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ok"}}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"})
	})
	words := strings.TrimSpace(strings.Repeat("ledger ", 1000)) // about 1,000 tokens
	const chat = `{"model":"om","stream":true,`
	for _, c := range []struct{ name, path, body string }{
		{"responses instructions", "/v1/responses", `{"model":"om","stream":true,"input":"hi","instructions":"` + words + `"}`},
		{"responses tools", "/v1/responses", `{"model":"om","stream":true,"input":"hi","tools":[{"type":"function","name":"f","description":"` + words + `","parameters":{}}]}`},
		{"responses text format", "/v1/responses", `{"model":"om","stream":true,"input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"description":"` + words + `"}}}}`},
		{"responses function output", "/v1/responses", `{"model":"om","stream":true,"input":[{"type":"function_call_output","call_id":"c","output":"` + words + `"}]}`},
		{"chat message name", "/v1/chat/completions", chat + `"messages":[{"role":"user","name":"` + words + `","content":"hi"}]}`},
		{"chat refusal", "/v1/chat/completions", chat + `"messages":[{"role":"assistant","refusal":"` + words + `"},{"role":"user","content":"hi"}]}`},
		{"chat response_format", "/v1/chat/completions", chat + `"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"description":"` + words + `"}}}}`},
		{"chat prediction", "/v1/chat/completions", chat + `"messages":[{"role":"user","content":"hi"}],"prediction":{"type":"content","content":"` + words + `"}}`},
	} {
		resp := st.post(t, c.path, c.body)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Usage.PromptTokens < 1000 {
			t.Errorf("%s: estimated prompt %d tokens (source %s), want at least the 1,000 words' tokens", c.name, e.Usage.PromptTokens, e.UsageSource)
		}
	}
}

// TestTokenArrayInputIsEstimated: OpenAI's embeddings (and legacy
// completions) take input as arrays of token ids. When the upstream reports
// no usage the gateway estimates the input from its text, and a token
// array has none (inputText): 1000 input tokens are billed as 0.
func TestTokenArrayInputIsEstimated(t *testing.T) {
	up := jsonUpstream(t, "application/json", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m"}`)
	st := oneProviderStack(t, "openai", up.URL)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = strconv.Itoa(1000 + i)
	}
	e, _ := doRequest(t, st, "/v1/embeddings", `{"model":"m","input":[[`+strings.Join(ids, ",")+`]]}`)
	if e.Usage.PromptTokens < 1000 {
		t.Fatalf("billed %+v (%s) for an input of 1000 token ids", e.Usage, e.UsageSource)
	}
}

// TestChatEstimateCountsTools: with no usage from the upstream the
// prompt is estimated, but chatPromptText reads only the messages' text:
// the request's tool definitions (often thousands of tokens) and the
// assistant messages' tool call arguments are not counted. The native
// Anthropic and Gemini estimates do count tools.
func TestChatEstimateCountsTools(t *testing.T) {
	up := jsonUpstream(t, "text/event-stream",
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	st := oneProviderStack(t, "openai", up.URL)
	desc := strings.Repeat("Looks up the weather forecast for a city and a date range. ", 40) // ~480 tokens
	args := strings.Repeat(`{\"city\":\"Paris\",\"days\":[1,2,3,4,5,6,7]}`, 20)               // ~400 tokens
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"` + args + `"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"}],` +
		`"tools":[{"type":"function","function":{"name":"weather","description":"` + desc + `","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	e, _ := doRequest(t, st, "/v1/chat/completions", body)
	if e.UsageSource != usage.SourceEstimated || e.Usage.PromptTokens < 500 {
		t.Fatalf("estimated prompt %d tokens (%s) for a request with ~900 tokens of tools and tool calls", e.Usage.PromptTokens, e.UsageSource)
	}
}

// TestEstimateCountsFunctionCallsAndRefusals: with no usage from the
// upstream, the output is estimated from what the client got; a legacy
// function_call (the answer to "functions") and a refusal are output as
// content is, streamed or not, and an assistant message's function_call
// is prompt. Neither the taps nor ScanChunk read them, and billed 0.
func TestEstimateCountsFunctionCallsAndRefusals(t *testing.T) {
	long := strings.Repeat("lorem ipsum dolor sit amet ", 40) // ~220 tokens
	chunk := func(delta, finish string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` +
			delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	for _, tc := range []struct{ name, contentType, answer, body string }{
		{"streamed function_call", "text/event-stream",
			chunk(`{"role":"assistant","function_call":{"name":"essay","arguments":""}}`, "null") +
				chunk(`{"function_call":{"arguments":"{\"text\":\"`+long+`\"}"}}`, "null") +
				chunk(`{}`, `"function_call"`) + "data: [DONE]\n\n",
			`{"model":"m","stream":true,"functions":[{"name":"essay"}],"messages":[{"role":"user","content":"hi"}]}`},
		{"streamed refusal", "text/event-stream",
			chunk(`{"role":"assistant","refusal":"`+long+`"}`, "null") + chunk(`{}`, `"stop"`) + "data: [DONE]\n\n",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"a body's function_call", "application/json",
			`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",` +
				`"content":null,"function_call":{"name":"essay","arguments":"{\"text\":\"` + long + `\"}"}},"finish_reason":"function_call"}]}`,
			`{"model":"m","functions":[{"name":"essay"}],"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := oneProviderStack(t, "openai", jsonUpstream(t, tc.contentType, tc.answer).URL)
			e, got := doRequest(t, st, "/v1/chat/completions", tc.body)
			if !strings.Contains(got, "lorem ipsum") {
				t.Fatalf("the client got %s", got)
			}
			if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens < 150 {
				t.Fatalf("billed %+v (%s) for ~220 tokens of output", e.Usage, e.UsageSource)
			}
		})
	}
	t.Run("prompt", func(t *testing.T) {
		st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", chunk(`{"content":"ok"}`, `"stop"`)+"data: [DONE]\n\n").URL)
		e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},`+
			`{"role":"assistant","content":null,"function_call":{"name":"essay","arguments":"{\"text\":\"`+long+`\"}"}},`+
			`{"role":"function","name":"essay","content":"done"}]}`)
		if e.Usage.PromptTokens < 150 {
			t.Fatalf("estimated prompt %+v (%s) for ~220 tokens of an assistant's function_call", e.Usage, e.UsageSource)
		}
	})
}

// TestNativeCancelBeforeOutputBillsThePrompt: a client gives up on a
// native Gemini stream before its first chunk (a thinking model is slow to
// start); the upstream has answered 200 and is working. When drain_timeout
// ends the drain, passThrough records the cancelled read as
// "upstream stream broke: context canceled" (r.Error), so the event is an
// upstream_error and Resolve bills nothing (no usage, an error, no
// output), though the provider bills the prompt. The chat relay, in the
// same case, keeps r.Error empty (end: readErr with a cause) and bills an
// estimated prompt as client_cancelled.
func TestNativeCancelBeforeOutputBillsThePrompt(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		holdOpen(r, 5*time.Second)
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "k-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
		c.DrainTimeout = 300 * time.Millisecond
	})
	prompt := strings.Repeat("Tell me everything about the history of Rome. ", 50)
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`},
		{"native", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"` + prompt + `"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			n := st.sink.count()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			for deadline := time.Now().Add(10 * time.Second); st.sink.count() == n; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no event")
				}
			}
			st.sink.mu.Lock()
			e := st.sink.events[n]
			st.sink.mu.Unlock()
			if e.Status != usage.StatusClientCancelled || e.Usage.PromptTokens < 400 {
				t.Fatalf("event status %s (%q), usage %+v (%s); want client_cancelled with the prompt (~500 tokens) estimated",
					e.Status, e.Error, e.Usage, e.UsageSource)
			}
		})
	}
}

// TestResponsesImagesCountInAnEstimate: a Responses API request's
// input_image parts counted nothing in an estimated prompt, where the same
// images as a chat request's image_url parts count 765 tokens each (85 at
// detail "low"). A client that sends images on /v1/responses, reads the
// first delta and hangs up on a response that outlasts drain_timeout was
// billed its text alone: 4 prompt tokens for ten images the chat route
// bills 7,660 for, and the provider bills the operator for them all.
func TestResponsesImagesCountInAnEstimate(t *testing.T) {
	created := `event: response.created` + "\n" + `data: {"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","model":"m","output":[]}}` + "\n\n" +
		`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"hello there"}` + "\n\n"
	chunk := `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hello there"}}]}` + "\n\n"
	const img = `data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==`
	var inputs, parts []string
	for i := 0; i < 9; i++ {
		inputs = append(inputs, `{"type":"input_image","image_url":"`+img+`"}`)
		parts = append(parts, `{"type":"image_url","image_url":{"url":"`+img+`"}}`)
	}
	inputs = append(inputs, `{"type":"input_image","image_url":"`+img+`","detail":"low"}`)
	parts = append(parts, `{"type":"image_url","image_url":{"url":"`+img+`","detail":"low"}}`)
	const images = 9*765 + 85
	for _, tc := range []struct{ name, up, path, body string }{
		{"chat", chunk, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"what is this"},` +
			strings.Join(parts, ",") + `]}]}`},
		{"responses", created, "/v1/responses", `{"model":"m","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"what is this"},` +
			strings.Join(inputs, ",") + `]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, let := heldUpstream(t, tc.up)
			st := nativeStack(t, "openai", up.URL, 300*time.Millisecond)
			resp := st.post(t, tc.path, tc.body)
			until(t, lines(resp.Body), "hello there")
			resp.Body.Close()
			select {
			case <-let:
			case <-time.After(20 * time.Second):
				t.Fatal("the upstream was still held 20 s after the client left (drain_timeout 300 ms)")
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.UsageSource != usage.SourceEstimated || e.Usage.PromptTokens < images {
				t.Fatalf("event %s %s %+v; want an estimated prompt of at least %d tokens (the images)", e.Status, e.UsageSource, e.Usage, images)
			}
		})
	}
}

// TestChatMessagesSpelledTwiceIsRefused: the chat route estimates the
// prompt from "messages", read by its exact key, while the Anthropic
// translation builds the upstream request from the body as encoding/json
// reads it, "Messages" too, the last one winning. With
// "messages":[hi],"Messages":[a long prompt], the upstream was sent the
// long prompt, and a request cut short before its first usage report
// (the client gone, the upstream silent past drain_timeout) was billed
// the estimate of "hi": 8 tokens for a prompt of about 1,800. Such a body
// is refused, as an ambiguous model or stream is, before any upstream call.
// So is one with "tools" and "Tools": the estimate counts the tool
// definitions of "tools" too.
func TestChatMessagesSpelledTwiceIsRefused(t *testing.T) {
	prompt := strings.Repeat("Tell me everything about the history of Rome. ", 200)
	big := `{"type":"function","function":{"name":"f","description":"` + prompt + `","parameters":{"type":"object"}}}`
	for name, body := range map[string]string{
		"messages": `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"Messages":[{"role":"user","content":"` + prompt + `"}]}`,
		"tools":    `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[],"Tools":[` + big + `]}`,
	} {
		t.Run(name, func(t *testing.T) { chatMemberSpelledTwice(t, body) })
	}
}

func chatMemberSpelledTwice(t *testing.T, body string) {
	var calls, sent atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		sent.Store(int64(len(b)))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		holdOpen(r, 5*time.Second)
	}))
	t.Cleanup(up.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
		c.DrainTimeout = 300 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "ambiguous") && calls.Load() == 0 {
			return
		}
		t.Logf("client: %d %.200s", resp.StatusCode, b)
	}
	for deadline := time.Now().Add(10 * time.Second); st.sink.count() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream was called %d times and no event was made", calls.Load())
		}
	}
	st.sink.mu.Lock()
	e := st.sink.events[0]
	st.sink.mu.Unlock()
	t.Fatalf("served: the upstream was called %d times, sent %d bytes, and the event billed %d prompt tokens (%s); want 400 naming the ambiguous member",
		calls.Load(), sent.Load(), e.Usage.PromptTokens, e.UsageSource)
}
