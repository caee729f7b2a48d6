package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestGeminiAltTheGatewayCannotMeterIsRefused: alt is Google's response
// format for every REST API (json, sse, media, proto). A format whose
// usage the gateway could not read (a protobuf body, say) is refused
// before any upstream call: served, it would have been billed nothing.
func TestGeminiAltTheGatewayCannotMeterIsRefused(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write([]byte("\x0a\x1c\x0a\x16\x0a\x14\x0a\x12the whole answer.\x10\x01"))
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "gp", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "gm-k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "gem", Provider: "gp", UpstreamModel: "gemini-2.5-pro"})
	})
	body := `{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`
	for _, path := range []string{
		"/gemini/v1beta/models/gem:generateContent?alt=proto",
		"/gemini/v1beta/models/gem:streamGenerateContent?alt=media",
		"/gemini/v1beta/models/gem:generateContent?alt=sse",
	} {
		resp := st.post(t, path, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "alt=") {
			t.Errorf("%s: %d %s, want 400 naming alt", path, resp.StatusCode, b)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// TestUnreadableBodyIsBilledAnEstimate: a 200 body the gateway cannot read
// the usage of is relayed, and so billed: its prompt and its bytes are
// estimated, never nothing.
func TestUnreadableBodyIsBilledAnEstimate(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `the whole answer, in no format the gateway reads`)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "gp", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "gm-k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "gem", Provider: "gp", UpstreamModel: "gemini-2.5-pro"})
	})
	resp := st.post(t, "/gemini/v1beta/models/gem:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"write me a long essay about metering"}]}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "the whole answer") {
		t.Fatalf("client: %d %s", resp.StatusCode, b)
	}
	if e.UsageSource != usage.SourceEstimated || e.Usage.PromptTokens == 0 || e.Usage.CompletionTokens == 0 || e.Error == "" {
		t.Fatalf("event: source %s, usage %+v, error %q: want an estimate of both, and the error", e.UsageSource, e.Usage, e.Error)
	}
}

// TestAmbiguousStreamOrModelKeyIsRefused: the native routes send the
// client's body upstream as it is, and read model and stream from it with
// encoding/json, which also takes "Stream" or "str\u0065am". An upstream
// that reads keys exactly (most non-Go servers) would then stream while
// the gateway expects one JSON body, which it could not meter. Such a body
// is refused before any upstream call.
func TestAmbiguousStreamOrModelKeyIsRefused(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "not expected", http.StatusTeapot)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "oai", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-oai-123456789"},
			gateway.ProviderConfig{Name: "ant", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"})
	})
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"oai/m","input":"hi","stream":true,"Stream":false}`},
		{"/v1/responses", `{"model":"oai/m","input":"hi","str\u0065am":true}`},
		{"/anthropic/v1/messages", `{"model":"ant/m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"stream":true,"STREAM":false}`},
		{"/anthropic/v1/messages", `{"model":"ant/m","Model":"ant/n","max_tokens":9,"messages":[]}`},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "ambiguous") {
			t.Errorf("%s %s: %d %s, want 400 naming the ambiguous member", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// TestTranslatedStreamErrorsAreScrubbed: a mid-stream upstream error that
// echoes the provider's key and address is scrubbed on chat completions
// translated from Anthropic or Gemini, as on the pass-through routes.
func TestTranslatedStreamErrorsAreScrubbed(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		leak := "bad key " + r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key") + " at http://" + r.Host + "/v1"
		if strings.Contains(r.URL.Path, "/messages") {
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
			fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\""+leak+"\"}}\n\n")
			return
		}
		fmt.Fprint(w, `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"}}]}`+"\r\n\r\n")
		fmt.Fprint(w, `data: {"error":{"code":500,"message":"`+leak+`","status":"INTERNAL"}}`+"\r\n\r\n")
	}))
	defer up.Close()
	host := strings.TrimPrefix(up.URL, "http://")
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "ant", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: secret},
			gateway.ProviderConfig{Name: "gem", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: secret})
	})
	for _, model := range []string{"ant/claude-x", "gem/gemini-x"} {
		resp := st.post(t, "/v1/chat/completions", `{"model":"`+model+`","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), secret) || strings.Contains(string(b), host) {
			t.Errorf("%s: the client sees the provider's key or address:\n%s", model, b)
		}
		if !strings.Contains(string(b), "[redacted]") || !strings.Contains(string(b), "[upstream]") {
			t.Errorf("%s: no scrubbed error reached the client:\n%s", model, b)
		}
	}
}

// TestUsageUnderAnotherSpellingIsStripped: a chunk whose usage member is
// spelled so that encoding/json still reads it ("Usage", "us\u0061ge") is
// metered, and the member is removed from what the client gets: usage
// rides only in the usage chunk, and only when the client asked for it.
func TestUsageUnderAnotherSpellingIsStripped(t *testing.T) {
	for _, key := range []string{`"us\u0061ge"`, `"Usage"`} {
		usageOnlyInTheUsageChunk(t, key)
	}
}

// TestUsageInAFinishChunkIsStripped: an upstream that puts its usage in
// the finish chunk (DESIGN.md, "Usage on the wire") has it read and
// stripped there: the client gets usage only in the usage chunk, and only
// when it asked (invariant 7). Leaving the member in the chunk passed
// every other test: a client that did not ask got the upstream's usage,
// and one that asked got it twice.
func TestUsageInAFinishChunkIsStripped(t *testing.T) {
	usageOnlyInTheUsageChunk(t, `"usage"`)
}

// usageOnlyInTheUsageChunk streams a finish chunk carrying its usage under
// key, to a client that asks for the usage chunk and to one that does
// not, and checks that usage reaches the client only in the usage chunk.
func usageOnlyInTheUsageChunk(t *testing.T, key string) {
	t.Helper()
	for _, include := range []bool{false, true} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],`+key+`:{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		}))
		st := newStack(t, func(c *gateway.Config) {
			c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "u", Type: "openai", BaseURL: up.URL})
		})
		opts := ""
		if include {
			opts = `"stream_options":{"include_usage":true},`
		}
		resp := st.post(t, "/v1/chat/completions", `{"model":"u/m","stream":true,`+opts+`"messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		up.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Usage.PromptTokens != 7 {
			t.Fatalf("%s: event usage %+v: want the upstream's 7 prompt tokens", key, e.Usage)
		}
		withUsage := 0
		for _, line := range strings.Split(string(b), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var chunk struct {
				Usage json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &chunk); err != nil {
				t.Fatalf("%s: chunk %s: %v", key, data, err)
			}
			if chunk.Usage != nil && string(chunk.Usage) != "null" {
				withUsage++
			}
		}
		if want := map[bool]int{false: 0, true: 1}[include]; withUsage != want {
			t.Errorf("%s, include_usage %v: %d chunks carry usage, want %d:\n%s", key, include, withUsage, want, b)
		}
	}
}

// TestAmbiguousModelOnOpenAIBodiesIsRefused: /v1/embeddings and
// /v1/completions send the client's body upstream with model set to the
// deployment's; a second member an upstream may read as the model
// ("Model": Go's encoding/json matches keys without regard to case) would
// be served past allowed_models and billed as the model the gateway read.
// Such a body is refused before any upstream call.
func TestAmbiguousModelOnOpenAIBodiesIsRefused(t *testing.T) {
	st := newStack(t, nil)
	for _, tc := range []struct{ path, body string }{
		{"/v1/embeddings", `{"model":"sim-small","Model":"sim-pro","input":"hi"}`},
		{"/v1/embeddings", `{"model":"sim-small","mod\u0065l":"sim-pro","input":"hi"}`},
		{"/v1/completions", `{"model":"sim-small","MODEL":"sim-pro","prompt":"hi"}`},
		{"/v1/completions", `{"model":"sim-small","prompt":"hi","stream":true,"Stream":false}`},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "ambiguous") {
			t.Errorf("%s %s: %d %s, want 400 naming the ambiguous member", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	if n := st.simStats(t).Requests.Total; n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// TestStreamTheGatewayCannotReadIsBilledAnEstimate: an OpenAI-compatible
// upstream answering a stream with lines that are no SSE field (plain
// text, a compressed body), or with data frames that hold no JSON object,
// had every byte relayed to the client and the request billed 0 tokens.
// What reaches the client is counted as output.
func TestStreamTheGatewayCannotReadIsBilledAnEstimate(t *testing.T) {
	sentence := "The capital of France is Paris, and this sentence is the answer. "
	bodies := map[string]string{
		"plain text":        strings.Repeat(sentence+"\n", 40),
		"non-JSON data":     strings.Repeat("data: "+sentence+"\n\n", 40) + "data: [DONE]\n\n",
		"JSON arrays":       strings.Repeat(`data: [{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`+sentence+`"}}]}]`+"\n\n", 40),
		"plain after chunk": `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" + strings.Repeat(sentence+"\n", 40),
	}
	st, serve := scriptedStack(t)
	// A raw JSON error body in the stream is an error, not output (a code
	// review of the change: it was billed as 46 tokens of output, ok).
	serve(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" +
		"{\n  \"error\": {\n    \"code\": 500,\n    \"message\": \"Internal error encountered while generating the answer.\",\n    \"status\": \"INTERNAL\"\n  }\n}\n")
	resp := st.post(t, "/v1/chat/completions", `{"model":"om","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusUpstreamError || e.Usage.CompletionTokens > 2 {
		t.Errorf("a raw JSON error in the stream: status %s, %d completion tokens; want upstream_error and its text not billed",
			e.Status, e.Usage.CompletionTokens)
	}
	for name, b := range bodies {
		for _, ep := range []struct{ path, req string }{
			{"/v1/chat/completions", `{"model":"om","stream":true,"messages":[{"role":"user","content":"What is the capital of France?"}]}`},
			{"/v1/completions", `{"model":"om","stream":true,"prompt":"What is the capital of France?"}`},
		} {
			serve(b)
			resp := st.post(t, ep.path, ep.req)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(got), "Paris") {
				t.Fatalf("%s, %s: the client got %q, want the upstream's text", name, ep.path, got)
			}
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			// 40 sentences of about 14 tokens: at least 400 tokens reached the client.
			if e.Usage.CompletionTokens < 400 || e.Usage.PromptTokens == 0 || e.UsageSource == usage.SourceUpstream {
				t.Errorf("%s, %s: event %s usage %+v, source %s: want the relayed text estimated (≥ 400 completion tokens)",
					name, ep.path, e.Status, e.Usage, e.UsageSource)
			}
		}
	}
}

// TestUsageReportThatCountsNoOutputIsNoBill: a usage report whose counts
// are missing or misnamed ("usage":{}, total_tokens alone, the Responses
// API's names on a chat chunk, Gemini's prompt count alone, Anthropic's
// output_tokens null) was recorded as the provider's figures, billing 0
// completion tokens for text the client got. What it lacks is estimated.
func TestUsageReportThatCountsNoOutputIsNoBill(t *testing.T) {
	text := strings.Repeat("The ledger counts every token the client receives. ", 12)
	chunk := `{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"content":"` + text + `"}}]}`
	finish := `{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	openaiStream := func(usageJSON string) string {
		return "data: " + chunk + "\n\ndata: " + finish + "\n\n" +
			`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[],"usage":` + usageJSON + "}\n\ndata: [DONE]\n\n"
	}
	geminiStream := `data: {"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":120,"totalTokenCount":129}}` + "\n\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":9}}` + "\n\n"
	anthropicStream := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":9,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":null}}` + "\n\n" +
		"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"
	st, serve := scriptedStack(t)
	chat := `{"model":"om","stream":true,"messages":[{"role":"user","content":"Tell me about the ledger, please."}]}`
	for _, c := range []struct{ name, upstream, path, req string }{
		{"usage {}", openaiStream(`{}`), "/v1/chat/completions", chat},
		{"total_tokens alone", openaiStream(`{"total_tokens":150}`), "/v1/chat/completions", chat},
		{"input and output names", openaiStream(`{"input_tokens":100,"output_tokens":50,"total_tokens":150}`), "/v1/chat/completions", chat},
		{"a negative completion", openaiStream(`{"prompt_tokens":9,"completion_tokens":-50}`), "/v1/chat/completions", chat},
		{"Gemini prompt count alone last", geminiStream, "/gemini/v1beta/models/gem:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"Tell me about the ledger, please."}]}]}`},
		{"Anthropic output_tokens null", anthropicStream, "/anthropic/v1/messages",
			`{"model":"cl","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"Tell me about the ledger, please."}]}`},
	} {
		serve(c.upstream)
		resp := st.post(t, c.path, c.req)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		// 12 sentences of about 9 tokens reached the client.
		if e.Usage.CompletionTokens < 80 || e.Usage.PromptTokens == 0 || e.UsageSource != usage.SourcePartial {
			t.Errorf("%s: usage %+v, source %s: want the output estimated (≥ 80 completion tokens), a prompt, partial",
				c.name, e.Usage, e.UsageSource)
		}
	}
}

// TestFailedResponseIsAnUpstreamError: a Responses API stream ending in
// response.failed was recorded as ok when its response object carried no
// error (null or absent). A failed response is an upstream error, whatever
// it says of why; its usage is still billed.
func TestFailedResponseIsAnUpstreamError(t *testing.T) {
	st, serve := scriptedStack(t)
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Half an answer\"}\n\n"
	for _, errJSON := range []string{`,"error":null`, ``, `,"error":{"code":"server_error","message":"boom"}`} {
		serve(delta + "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\"" + errJSON +
			`,"usage":{"input_tokens":12,"output_tokens":4,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}}` + "\n\n")
		resp := st.post(t, "/v1/responses", `{"model":"om","stream":true,"input":"hi"}`)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != usage.StatusUpstreamError || e.Error == "" || e.Usage.PromptTokens != 12 || e.Usage.CompletionTokens != 4 {
			t.Errorf("response.failed%s: status %s, error %q, usage %+v: want upstream_error, its usage billed", errJSON, e.Status, e.Error, e.Usage)
		}
	}
}

// breakStream, at the end of a scripted body, breaks the connection after
// the rest is sent: no end of the chunked body, as a provider that died.
const breakStream = "\x00break"

// scriptedStack is a gateway over an upstream that answers every request
// with the body serve last set, as an SSE stream: the openai provider's
// model "om", the gemini provider's "gem" and the anthropic one's "cl".
func scriptedStack(t *testing.T) (st *stack, serve func(body string)) {
	t.Helper()
	var body atomic.Value
	body.Store("")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		b, broken := strings.CutSuffix(body.Load().(string), breakStream)
		_, _ = io.WriteString(w, b)
		if broken {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
	}))
	t.Cleanup(up.Close)
	st = newStack(t, threeProviders(up.URL))
	return st, func(b string) { body.Store(b) }
}

// threeProviders configures a provider of each type at the upstream at
// url: the openai provider's model "om", the gemini provider's "gem" and
// the anthropic one's "cl".
func threeProviders(url string) func(c *gateway.Config) {
	return func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: url + "/v1", APIKey: "k"},
			gateway.ProviderConfig{Name: "gp", Type: "gemini", BaseURL: url + "/v1beta", APIKey: "k"},
			gateway.ProviderConfig{Name: "ap", Type: "anthropic", BaseURL: url + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"},
			gateway.ModelConfig{Name: "gem", Provider: "gp", UpstreamModel: "gemini-x"},
			gateway.ModelConfig{Name: "cl", Provider: "ap", UpstreamModel: "claude-x"})
	}
}

// TestHeldLastChunkIsDeliveredWhenTheStreamBreaks: a native Gemini stream
// holds back a chunk whose usage looks final until the stream ends. When
// the connection then broke, a stream of that one chunk (Vertex AI puts
// finishReason on every chunk) answered 502 with no content, and the
// customer was billed the whole answer. The chunk now goes to the client
// before the stream is broken off.
func TestHeldLastChunkIsDeliveredWhenTheStreamBreaks(t *testing.T) {
	st, serve := scriptedStack(t)
	serve(`data: {"candidates":[{"content":{"parts":[{"text":"The whole answer."}],"role":"model"},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"totalTokenCount":9}}` + "\r\n\r\n" + breakStream)
	resp := st.post(t, "/gemini/v1beta/models/gem:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`)
	got, _ := io.ReadAll(resp.Body) // a broken stream: the error is expected
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "The whole answer.") {
		t.Errorf("client got %d %q; want 200 and the chunk", resp.StatusCode, got)
	}
	if e.Status != usage.StatusUpstreamError || e.HTTPStatus != http.StatusOK || e.Usage.PromptTokens != 5 || e.Usage.CompletionTokens != 4 {
		t.Errorf("event %s %d %+v; want upstream_error after a 200, billing the 5 + 4 tokens the client received", e.Status, e.HTTPStatus, e.Usage)
	}
}

// TestAnthropicErrorAfterTheUsageIsTheRequestsStatus: a native Anthropic
// stream was made durable at message_delta, its final usage, so an error
// event after it (overloaded mid-stream) was recorded ok, with no error,
// where the same stream through /v1/chat/completions was upstream_error.
// The usage goes to the client once the next event is in the event.
func TestAnthropicErrorAfterTheUsageIsTheRequestsStatus(t *testing.T) {
	st, serve := scriptedStack(t)
	body := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":9,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there"}}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}` + "\n\n"
	for _, c := range []struct{ name, end string }{
		{"error", "event: error\ndata: " + `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"},
		{"message_stop", "event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"},
		{"the end of the body", ""},
	} {
		serve(body + c.end)
		resp := st.post(t, "/anthropic/v1/messages", `{"model":"cl","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if !strings.Contains(string(got), `"output_tokens":3`) || !strings.HasSuffix(string(got), c.end) {
			t.Errorf("%s: the client got %q; want the stream whole", c.name, got)
		}
		wantStatus := usage.StatusOK
		if c.name == "error" {
			wantStatus = usage.StatusUpstreamError
		}
		if e.Status != wantStatus || e.Usage.PromptTokens != 9 || e.Usage.CompletionTokens != 3 ||
			(wantStatus == usage.StatusUpstreamError) != strings.Contains(e.Error, "Overloaded") {
			t.Errorf("%s: event %s %q %+v; want %s, 9 + 3 tokens", c.name, e.Status, e.Error, e.Usage, wantStatus)
		}
	}
}

// TestUsageChunkSaysWhatIsBilled: the client that asked for usage was sent
// the upstream's report as it came, also where the bill is not that
// report: a report counting no completion, whose completion was estimated
// (billed 14 tokens, the client told 0), or a cached count over the prompt,
// clamped. The usage chunk now carries the counts billed.
func TestUsageChunkSaysWhatIsBilled(t *testing.T) {
	st, serve := scriptedStack(t)
	chunk := `{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"content":"` +
		strings.Repeat("Every token the client receives is billed. ", 4) + `"}}]}`
	finish := `{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	usageChunk := func(u string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[],"usage":` + u + "}\n\n"
	}
	for _, c := range []struct{ name, stream string }{
		{"no completion counted, reported first", usageChunk(`{"prompt_tokens":100,"completion_tokens":0,"total_tokens":100}`) +
			"data: " + chunk + "\n\ndata: " + finish + "\n\ndata: [DONE]\n\n"},
		{"cached over the prompt", "data: " + chunk + "\n\ndata: " + finish + "\n\n" +
			usageChunk(`{"prompt_tokens":10,"completion_tokens":40,"total_tokens":50,"prompt_tokens_details":{"cached_tokens":50}}`) + "data: [DONE]\n\n"},
	} {
		serve(c.stream)
		resp := st.post(t, "/v1/chat/completions", `{"model":"om","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		var told struct {
			Usage struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
				Details    struct {
					Cached int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		for l := range strings.SplitSeq(string(body), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"usage"`) {
				_ = json.Unmarshal([]byte(d), &told)
			}
		}
		u := told.Usage
		if u.Prompt != e.Usage.PromptTokens || u.Completion != e.Usage.CompletionTokens || u.Details.Cached != e.Usage.CachedTokens {
			t.Errorf("%s: the client was told %+v, the event bills %+v", c.name, u, e.Usage)
		}
	}
}

// TestErrorEventCarryingOnlyUsageReachesTheClient (a review): a named
// `event: error` whose data is a usage chunk (choices: [], usage) was
// taken for the usage chunk: recorded as the upstream error it is, but
// the client saw a clean end (or the usage chunk without its event name),
// never the error. It is relayed as the error event, its usage stripped.
func TestErrorEventCarryingOnlyUsageReachesTheClient(t *testing.T) {
	for _, count := range []string{"7", "7.0"} { // read by the scanner; by the lenient parser
		for _, include := range []bool{false, true} {
			up := jsonUpstream(t, "text/event-stream", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"partial answer"},"finish_reason":null}]}`+"\n\n"+
				"event: error\n"+`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":`+count+`,"completion_tokens":3,"total_tokens":10}}`+"\n\n")
			st := newStack(t, oneUpstream(up.URL))
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			if include {
				body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			}
			resp := st.post(t, "/v1/chat/completions", body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_, errEvent, found := strings.Cut(string(b), "event: error\ndata: ")
			errEvent, _, _ = strings.Cut(errEvent, "\n\n")
			if !found || strings.Contains(errEvent, "usage") || !strings.Contains(errEvent, `"choices":[]`) {
				t.Fatalf("count %s, include_usage %v: the client got\n%s\nwant the error event relayed, its usage stripped", count, include, b)
			}
			if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusUpstreamError || e.Usage.PromptTokens != 7 || e.Usage.CompletionTokens != 3 {
				t.Fatalf("count %s: event %s %+v, want an upstream error billed the provider's 7 + 3", count, e.Status, e.Usage)
			}
		}
	}
}

// TestUnreachableUpstreamsAddressIsScrubbed: an upstream whose host name
// resolves to an address that refuses the connection is told to the
// client without that address (net's "dial tcp 10.1.2.3:443: connect:
// connection refused"): the base URL's host was scrubbed, the address it
// resolved to, an internal one for a self-hosted model, was shown, and
// stayed in the customer's request log.
func TestUnreachableUpstreamsAddressIsScrubbed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now: connection refused
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "far", Type: "openai", BaseURL: fmt.Sprintf("http://localhost:%d/v1", port), APIKey: "sk-far-0123456789"})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"far/m","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "could not be reached") {
		t.Fatalf("%d %s; want 502, the upstream not reached", resp.StatusCode, b)
	}
	if addr := fmt.Sprintf(":%d", port); strings.Contains(string(b), addr) || strings.Contains(string(b), "127.0.0.1") {
		t.Errorf("the client sees the address the upstream's host resolved to:\n%s", b)
	}
	if !strings.Contains(string(b), "[upstream]") {
		t.Errorf("the error does not say where it failed, scrubbed:\n%s", b)
	}
}
