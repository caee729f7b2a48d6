package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// oneProviderStack is a gateway whose model "m" goes to a provider of type typ at url.
func oneProviderStack(t *testing.T, typ, url string) *stack {
	t.Helper()
	base := url + "/v1"
	if typ == "gemini" {
		base = url + "/v1beta"
	}
	return newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: typ, BaseURL: base, APIKey: "sk-up-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
	})
}

// doRequest posts body to path and returns the event and what the client read.
func doRequest(t *testing.T, st *stack, path, body string, header ...string) (usage.Event, string) {
	t.Helper()
	resp := st.post(t, path, body, header...)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return st.sink.event(t, resp.Header.Get("X-Request-Id")), string(b)
}

// TestGeminiNativeFinishReasonOnEveryChunk: Vertex AI sends
// finishReason "STOP" on every chunk of a stream (see the recorded
// fixtures/gemini/vertex-error-mid-stream.sse), while usageMetadata is
// cumulative on every chunk: the last one is the bill. The native
// pass-through commits the event at the first chunk whose report is
// "final" and never updates it, so later (larger) cumulative usage is
// forwarded to the client but not billed.
func TestGeminiNativeFinishReasonOnEveryChunk(t *testing.T) {
	chunk := func(text string, cand int) string {
		return `data: {"candidates": [{"content": {"parts": [{"text": "` + text + `"}],"role": "model"},"finishReason": "STOP","index": 0}],` +
			`"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": ` + strconv.Itoa(cand) + `,"totalTokenCount": ` + strconv.Itoa(5+cand) + `},"modelVersion": "gemini-2.5-pro"}` + "\r\n\r\n"
	}
	body := chunk("First ", 1) + chunk("Second ", 2) + chunk("Third and last, a much longer chunk.", 40)
	up := jsonUpstream(t, "text/event-stream", body)
	st := oneProviderStack(t, "gemini", up.URL)
	e, got := doRequest(t, st, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	if !strings.Contains(got, `"candidatesTokenCount": 40`) {
		t.Fatalf("the client did not get the last chunk:\n%s", got)
	}
	if e.Usage.CompletionTokens != 40 || e.Usage.PromptTokens != 5 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("billed %+v (%s); the client was sent the final cumulative usage of 40 completion tokens", e.Usage, e.UsageSource)
	}
}

// TestGeminiNativeSingleChunkStream: a stream whose first event carries
// the final usage (the recorded vertex-flex-tier-stream.sse is one chunk
// with finishReason and usageMetadata) is committed before anything was
// forwarded: passThrough flushes the ResponseWriter before it has written
// the response header, so net/http sends a bare 200 with a sniffed
// text/plain Content-Type (the upstream's text/event-stream and the
// gateway's headers are lost), and the event records http_status 0 and no
// ttft.
func TestGeminiNativeSingleChunkStream(t *testing.T) {
	body := `data: {"candidates": [{"content": {"role": "model","parts": [{"text": "Hi"}]},"finishReason": "STOP"}],` +
		`"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 1,"totalTokenCount": 106,"thoughtsTokenCount": 100},"modelVersion": "gemini-2.5-pro"}` + "\r\n\r\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := oneProviderStack(t, "gemini", up.URL)
	resp := st.post(t, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	ct := resp.Header.Get("Content-Type")
	if ct != "text/event-stream" || e.HTTPStatus != http.StatusOK || e.TTFTMillis == 0 {
		t.Fatalf("client got Content-Type %q; event http_status=%d ttft_ms=%d usage %+v; body:\n%s",
			ct, e.HTTPStatus, e.TTFTMillis, e.Usage, b)
	}
}

// replayFixtures serves the recorded fixture named by the request (the model in
// the body, or the Gemini path's model, with "~" for "/"), in uneven writes.
func replayFixtures(t *testing.T, dir string) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		if _, rest, ok := strings.Cut(r.URL.Path, "/models/"); ok {
			req.Model, _, _ = strings.Cut(rest, ":")
		}
		b, err := os.ReadFile(filepath.Join(dir, strings.ReplaceAll(req.Model, "~", "/")))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for n := 7; len(b) > 0; n = n*3%101 + 1 {
			n = min(n, len(b))
			_, _ = w.Write(b[:n])
			_ = rc.Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(up.Close)
	return up
}

func fixtureDir(t *testing.T) string {
	dir, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTranslatedChatConformance replays the recorded Anthropic and Gemini
// streams through /v1/chat/completions (translated), which the
// conformance test does not cover, and holds the event, and the usage chunk
// the client got, to expected.json.
func TestTranslatedChatConformance(t *testing.T) {
	dir := fixtureDir(t)
	expected, err := fixture.LoadExpected(dir)
	if err != nil {
		t.Fatal(err)
	}
	up := replayFixtures(t, dir)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "ra", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k-123456789"},
			gateway.ProviderConfig{Name: "rg", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "k-123456789"})
	})
	for folder, prov := range map[string]string{"anthropic": "ra", "gemini": "rg"} {
		streams, err := fixture.Streams(dir, folder)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range streams {
			want := expected[name]
			t.Run(name, func(t *testing.T) {
				model := prov + "/" + strings.ReplaceAll(name, "/", "~")
				resp := st.post(t, "/v1/chat/completions", `{"model":"`+model+`","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
				if e.UsageSource != want.Source {
					t.Fatalf("usage_source %s (%+v), want %s", e.UsageSource, e.Usage, want.Source)
				}
				if want.Source != usage.SourceUpstream {
					return
				}
				w := usage.Tokens{PromptTokens: want.PromptTokens, CachedTokens: want.CachedTokens, CacheWriteTokens: want.CacheWriteTokens,
					CompletionTokens: want.CompletionTokens, ReasoningTokens: want.ReasoningTokens, WebSearchRequests: want.WebSearchRequests}
				if e.Usage != w {
					t.Fatalf("usage %+v, want %+v", e.Usage, w)
				}
				if !strings.Contains(string(b), fmt.Sprintf(`"prompt_tokens":%d,"completion_tokens":%d`, w.PromptTokens, w.CompletionTokens)) {
					t.Fatalf("the client's usage chunk differs:\n%s", b)
				}
			})
		}
	}
}

// dribbleUpstream serves body one byte per write, each flushed.
func dribbleUpstream(t *testing.T, body string) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := 0; i < len(body); i++ {
			_, _ = io.WriteString(w, body[i:i+1])
			_ = rc.Flush()
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// TestOpenAIFramingOddities: framing variants of one stream all bill the
// same usage.
func TestOpenAIFramingOddities(t *testing.T) {
	long := strings.Repeat("x", 20000)
	c1 := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + long + `"},"finish_reason":null}]}`
	c2 := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	c3 := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":22,"total_tokens":33,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":7}}}`
	split := func(s string) string { // multi-line data at a JSON comma
		i := strings.Index(s, `,"model"`)
		return s[:i] + "\ndata:" + s[i:]
	}
	for name, body := range map[string]string{
		"CR only":            "data: " + c1 + "\r\rdata: " + c2 + "\r\rdata: " + c3 + "\r\rdata: [DONE]\r\r",
		"CRLF and BOM":       "\xEF\xBB\xBFdata: " + c1 + "\r\n\r\ndata: " + c2 + "\r\n\r\n: keep-alive\r\n\r\ndata: " + c3 + "\r\n\r\ndata: [DONE]\r\n\r\n",
		"no space, no final": "data:" + c1 + "\n\ndata:" + c2 + "\n\ndata:" + c3,
		"multi-line data":    "data: " + split(c1) + "\n\ndata: " + split(c2) + "\n\ndata: " + split(c3) + "\n\n",
		"id retry event":     "id: 1\nretry: 10\ndata: " + c1 + "\n\nevent: message\ndata: " + c2 + "\n\nid: 3\ndata: " + c3 + "\n\ndata: [DONE]\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			up := dribbleUpstream(t, body)
			st := newStack(t, oneUpstream(up.URL))
			e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
			want := usage.Tokens{PromptTokens: 11, CachedTokens: 3, CompletionTokens: 22, ReasoningTokens: 7}
			if e.Usage != want || e.UsageSource != usage.SourceUpstream {
				t.Fatalf("billed %+v (%s), want %+v", e.Usage, e.UsageSource, want)
			}
			if !strings.Contains(got, `"completion_tokens":22`) || !strings.Contains(got, long) {
				t.Fatalf("client got:\n%.500s", got)
			}
		})
	}
}

// TestResponsesBodyWithoutUsageBillsItsOutput: a non-streamed Responses
// API answer that carries no usage (an OpenAI-compatible server that omits
// it) is relayed to the client whole, but ResponsesBody never adds the
// output text to the report, so the estimate bills 0 completion tokens
// for it. Every other body tap (chat, Anthropic, Gemini) adds its text.
func TestResponsesBodyWithoutUsageBillsItsOutput(t *testing.T) {
	answer := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	body := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m",` +
		`"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + answer + `","annotations":[]}]}]}`
	up := jsonUpstream(t, "application/json", body)
	st := oneProviderStack(t, "openai", up.URL)
	e, got := doRequest(t, st, "/v1/responses", `{"model":"m","input":"write it"}`)
	if !strings.Contains(got, answer) {
		t.Fatalf("client got %s", got)
	}
	if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens < 300 {
		t.Fatalf("billed %+v (%s) for an answer of about 400 tokens", e.Usage, e.UsageSource)
	}
}

// TestResponsesFieldsOfOtherTypes (a review): the Responses API's events
// and bodies were decoded whole and strictly, so a field of another type
// lost the whole event: deltas carrying a number where a string is were
// relayed and billed nothing (0 completion tokens for about 150), and a
// body or a response.completed whose counts are written 900.0 was
// estimated (a body filed as an upstream error). Each field is read on its
// own now, counts as tap.Count reads them.
func TestResponsesFieldsOfOtherTypes(t *testing.T) {
	var b strings.Builder
	b.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\"}}\n\n")
	for range 30 {
		b.WriteString("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"lorem ipsum dolor sit amet \",\"message\":1,\"sequence_number\":\"x\"}\n\n")
	}
	noUsage := b.String() + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\",\"created_at\":1.5}}\n\n"
	floatUsage := b.String() + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\",\"output\":{},\"usage\":{\"input_tokens\":900.0,\"input_tokens_details\":{\"cached_tokens\":\"100\"},\"output_tokens\":160,\"output_tokens_details\":{\"reasoning_tokens\":10.0}}}}\n\n"

	up := jsonUpstream(t, "text/event-stream", noUsage)
	e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	if strings.Count(got, "lorem ipsum") != 30 || e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens < 100 {
		t.Fatalf("no usage: billed %+v (%s) for about 150 tokens relayed", e.Usage, e.UsageSource)
	}
	want := usage.Tokens{PromptTokens: 900, CachedTokens: 100, CompletionTokens: 160, ReasoningTokens: 10}
	up = jsonUpstream(t, "text/event-stream", floatUsage)
	if e, _ := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`); e.Usage != want || e.UsageSource != usage.SourceUpstream || e.Status != usage.StatusOK {
		t.Fatalf("usage of other types, streamed: billed %+v (%s, %s), want %+v from the provider", e.Usage, e.UsageSource, e.Status, want)
	}
	body := `{"id":"resp_1","object":"response","created_at":1.5,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi.","annotations":{}}]}],"usage":{"input_tokens":900.0,"input_tokens_details":{"cached_tokens":"100"},"output_tokens":160,"output_tokens_details":{"reasoning_tokens":10.0}}}`
	up = jsonUpstream(t, "application/json", body)
	if e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","input":"hi"}`); !strings.Contains(got, "Hi.") || e.Usage != want || e.UsageSource != usage.SourceUpstream || e.Status != usage.StatusOK {
		t.Fatalf("usage of other types, a body: billed %+v (%s, %s, %s), want %+v from the provider", e.Usage, e.UsageSource, e.Status, e.Error, want)
	}
	// A count that still cannot be read is no report: estimated, not zero.
	up = jsonUpstream(t, "application/json", strings.Replace(body, `"output_tokens":160`, `"output_tokens":1.5`, 1))
	if e, _ := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","input":"hi"}`); e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens == 0 {
		t.Fatalf("an unreadable count: billed %+v (%s), want an estimate", e.Usage, e.UsageSource)
	}
}

// TestLeadingUsageChunkIsNotFinal: an upstream that reports the prompt's
// usage first, in a choices-less chunk (completion 0), then streams content
// and breaks before its final usage chunk. ChatTap marks any report on a
// choices-less chunk final, so the event says usage_source "upstream" with
// 0 completion tokens, though the client was sent the whole answer; the
// report was not final (the finish chunk never came) and the streamed output
// should have been estimated ("partial").
func TestLeadingUsageChunkIsNotFinal(t *testing.T) {
	answer := strings.Repeat("lorem ipsum dolor sit amet ", 30)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10}}`+"\n\n")
		for _, word := range strings.SplitAfter(answer, " ") {
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+word+`"},"finish_reason":null}]}`+"\n\n")
		}
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection breaks before the finish and usage chunks
	}))
	t.Cleanup(up.Close)
	st := newStack(t, oneUpstream(up.URL))
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if !strings.Contains(string(b), "amet") {
		t.Fatalf("client got:\n%s", b)
	}
	if e.Usage.CompletionTokens < 100 || e.UsageSource != usage.SourcePartial {
		t.Fatalf("billed %+v (%s, status %s) for ~150 tokens streamed to the client", e.Usage, e.UsageSource, e.Status)
	}
}

// streamedAnswer is about 150 o200k tokens of output.
var streamedAnswer = strings.Repeat("lorem ipsum dolor sit amet ", 30)

// TestGeminiCountsInEveryProto3JSONForm: Google's APIs speak the proto3
// JSON mapping, under which an int32 such as usageMetadata.promptTokenCount
// may be written as a number in any form (11, 11.0, 1.1e1) or as a string
// ("11"), and parsers must accept them all: they are billed as sent, on the
// native route and on /v1/chat/completions alike. A count that still cannot
// be read is no usage report: the stream is estimated, never billed zero
// as the provider's figure.
func TestGeminiCountsInEveryProto3JSONForm(t *testing.T) {
	for name, c := range map[string]struct {
		usageMetadata string
		source        usage.Source
	}{
		"quoted":     {`{"promptTokenCount":"11","candidatesTokenCount":"150","totalTokenCount":"161"}`, usage.SourceUpstream},
		"exponent":   {`{"promptTokenCount":1.1e1,"candidatesTokenCount":1.5e2,"totalTokenCount":161}`, usage.SourceUpstream},
		"fraction":   {`{"promptTokenCount":11.0,"candidatesTokenCount":150.00,"totalTokenCount":161}`, usage.SourceUpstream},
		"letters":    {`{"promptTokenCount":"11","candidatesTokenCount":"abc"}`, usage.SourceEstimated},
		"fractional": {`{"promptTokenCount":11,"candidatesTokenCount":1.5}`, usage.SourceEstimated},
		"negative":   {`{"promptTokenCount":11,"candidatesTokenCount":-150}`, usage.SourceEstimated},
		"too large":  {`{"promptTokenCount":11,"candidatesTokenCount":1e19}`, usage.SourceEstimated},
	} {
		t.Run(name, func(t *testing.T) {
			body := `data: {"candidates":[{"content":{"parts":[{"text":"` + streamedAnswer + `"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-pro"}` + "\r\n\r\n" +
				`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":` + c.usageMetadata + `,"modelVersion":"gemini-2.5-pro"}` + "\r\n\r\n"
			up := jsonUpstream(t, "text/event-stream", body)
			st := oneProviderStack(t, "gemini", up.URL)
			for _, path := range []string{"native", "chat"} {
				var e usage.Event
				var got string
				if path == "native" {
					e, got = doRequest(t, st, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
						`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
				} else {
					e, got = doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
				}
				if !strings.Contains(got, "amet") {
					t.Fatalf("%s: client got %s", path, got)
				}
				if e.UsageSource != c.source {
					t.Errorf("%s: billed %+v as %q for usageMetadata %s; want %q", path, e.Usage, e.UsageSource, c.usageMetadata, c.source)
				}
				switch {
				case c.source == usage.SourceUpstream && (e.Usage.PromptTokens != 11 || e.Usage.CompletionTokens != 150):
					t.Errorf("%s: billed %+v for usageMetadata %s; want prompt 11, completion 150", path, e.Usage, c.usageMetadata)
				case c.source != usage.SourceUpstream && e.Usage.CompletionTokens < 100:
					t.Errorf("%s: billed %+v (%s) for ~150 tokens streamed", path, e.Usage, e.UsageSource)
				}
			}
		})
	}
}

// TestAnthropicNativeFramingByteForByte: the native route forwards the
// upstream's bytes unchanged and bills the same usage whatever the framing.
func TestAnthropicNativeFramingByteForByte(t *testing.T) {
	long := strings.Repeat("y", 12000)
	evs := []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,"output_tokens":1}}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + long + `"}}`,
		`: ping`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3000}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}
	for name, sep := range map[string][2]string{"LF": {"\n", "\n\n"}, "CR": {"\r", "\r\r"}, "CRLF": {"\r\n", "\r\n\r\n"}} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("\xEF\xBB\xBF")
			for _, ev := range evs {
				b.WriteString(strings.ReplaceAll(ev, "\n", sep[0]) + sep[1])
			}
			up := dribbleUpstream(t, b.String())
			st := oneProviderStack(t, "anthropic", up.URL)
			e, got := doRequest(t, st, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
			want := usage.Tokens{PromptTokens: 112, CachedTokens: 100, CacheWriteTokens: 7, CompletionTokens: 3000}
			if e.Usage != want || e.UsageSource != usage.SourceUpstream {
				t.Fatalf("billed %+v (%s), want %+v", e.Usage, e.UsageSource, want)
			}
			if got != b.String() {
				t.Fatalf("the client got %d bytes, the upstream sent %d", len(got), b.Len())
			}
		})
	}
}

// TestAnthropicUnreadableFinalUsageIsNotUpstream: Anthropic's
// message_delta usage is cumulative and overrides message_start's
// (output_tokens 1 there). Integral floats are read as integers, and a
// field of the wrong type elsewhere in message_delta does not lose its
// usage; but a final report that cannot be read (a negative or fractional
// count, a usage that is not an object) is not the provider's figure: the
// stream resolves as partial, its streamed output estimated, never as
// message_start's placeholder billed "upstream".
func TestAnthropicUnreadableFinalUsageIsNotUpstream(t *testing.T) {
	for name, c := range map[string]struct {
		delta  string
		source usage.Source
	}{
		"negative":            {`"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":-150}`, usage.SourcePartial},
		"fractional":          {`"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":150.5}`, usage.SourcePartial},
		"not an object":       {`"delta":{"stop_reason":"end_turn"},"usage":[150]`, usage.SourcePartial},
		"integral float":      {`"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":150.0}`, usage.SourceUpstream},
		"float elsewhere":     {`"index":0.5,"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":150}`, usage.SourceUpstream},
		"wrong type in delta": {`"delta":{"stop_reason":1},"usage":{"output_tokens":"150"}`, usage.SourceUpstream},
	} {
		t.Run(name, func(t *testing.T) {
			body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + streamedAnswer + "\"}}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\"," + c.delta + "}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
			up := jsonUpstream(t, "text/event-stream", body)
			st := oneProviderStack(t, "anthropic", up.URL)
			for _, path := range []string{"native", "chat"} {
				var e usage.Event
				if path == "native" {
					e, _ = doRequest(t, st, "/anthropic/v1/messages", `{"model":"m","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
				} else {
					e, _ = doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
				}
				if e.UsageSource != c.source || e.Usage.PromptTokens != 20 || e.Usage.CompletionTokens < 100 ||
					c.source == usage.SourceUpstream && e.Usage.CompletionTokens != 150 {
					t.Errorf("%s: billed %+v as %q for message_delta {%s}; want prompt 20, ~150 completion, %q",
						path, e.Usage, e.UsageSource, c.delta, c.source)
				}
			}
		})
	}
}

// TestLegacyCompletionsUsageChunkShape: on POST /v1/completions, when the
// upstream's usage rides on its finish chunk (not a choices-less chunk),
// the gateway synthesizes the client's usage chunk with
// AppendUsageChunk, which writes a chat completion chunk
// ("object":"chat.completion.chunk", id "chatcmpl-…" when the upstream
// named none) into a text_completion stream.
func TestLegacyCompletionsUsageChunkShape(t *testing.T) {
	up := jsonUpstream(t, "text/event-stream",
		`data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"hello","logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`+"\n\ndata: [DONE]\n\n")
	st := oneProviderStack(t, "openai", up.URL)
	e, got := doRequest(t, st, "/v1/completions", `{"model":"m","prompt":"say hello","stream":true,"stream_options":{"include_usage":true}}`)
	if e.Usage.PromptTokens != 4 || e.Usage.CompletionTokens != 1 {
		t.Fatalf("billed %+v", e.Usage)
	}
	if strings.Contains(got, `"chat.completion.chunk"`) {
		t.Fatalf("a legacy completions client got a chat completion chunk:\n%s", got)
	}
}

// loremAnswer is about 150 o200k tokens of output.
var loremAnswer = strings.Repeat("lorem ipsum dolor sit amet ", 30)

// TestChunksOfOtherFieldTypesAreCounted: a chunk that ScanChunk does not
// take and ParseChunk (encoding/json into int64/string fields) cannot
// decode was forwarded to the client untouched and not tapped at all: its
// text was not added to the estimate. An OpenAI-compatible server
// that writes "created" as a float (Python's time.time()) or streams
// delta.content as an array of parts (Mistral's reasoning models) has its
// whole answer sent to the client and billed 0 completion tokens.
func TestChunksOfOtherFieldTypesAreCounted(t *testing.T) {
	for name, body := range map[string]string{
		"float created": `data: {"id":"c","object":"chat.completion.chunk","created":1700000000.5,"model":"m","choices":[{"index":0,"delta":{"content":"` + loremAnswer + `"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c","object":"chat.completion.chunk","created":1700000000.5,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
		"content parts": `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"` + loremAnswer + `"}]},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			up := jsonUpstream(t, "text/event-stream", body)
			st := newStack(t, oneUpstream(up.URL))
			e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			if !strings.Contains(got, "amet") {
				t.Fatalf("client got %s", got)
			}
			if e.Usage.CompletionTokens < 100 {
				t.Fatalf("billed %+v (%s) for ~150 tokens of output sent to the client", e.Usage, e.UsageSource)
			}
		})
	}
}

// TestUsageChunkOfOtherCountTypes: a usage chunk whose counts
// encoding/json cannot read as int64 (integral floats, 11.0) was forwarded
// verbatim as soon as it arrived: a client that did not ask for usage gets
// a usage chunk (invariant 7: the usage chunk only when asked), one that
// asked gets two usage chunks with different figures (the upstream's,
// before the event was durable, against invariant 2b, then the gateway's
// estimate), and the upstream's own report (11 and 150) is not billed.
func TestUsageChunkOfOtherCountTypes(t *testing.T) {
	body := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + loremAnswer + `"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11.0,"completion_tokens":150.0,"total_tokens":161.0}}` + "\n\ndata: [DONE]\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := newStack(t, oneUpstream(up.URL))
	_, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if strings.Contains(got, `"usage"`) {
		t.Errorf("a client that did not ask for usage got a usage chunk:\n%s", strings.ReplaceAll(got, loremAnswer, "…"))
	}
	e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if n := strings.Count(got, `"usage"`); n != 1 {
		t.Errorf("a client that asked for usage got %d usage chunks:\n%s", n, strings.ReplaceAll(got, loremAnswer, "…"))
	}
	if e.Usage.PromptTokens != 11 || e.Usage.CompletionTokens != 150 {
		t.Errorf("billed %+v (%s); the upstream reported 11 prompt and 150 completion tokens", e.Usage, e.UsageSource)
	}
}

// TestUnreadableUsageUnderAnotherCase: a usage chunk whose member is
// spelled "Usage", with an unreadable (fractional) prompt count:
// ParseChunkLenient vetted only m["usage"], so the struct decode (which
// matches keys case-insensitively) read prompt_tokens as 0, and the event
// was billed 0 prompt tokens as the upstream's own figures.
func TestUnreadableUsageUnderAnotherCase(t *testing.T) {
	body := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + loremAnswer + `"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"Usage":{"prompt_tokens":5000.5,"completion_tokens":150}}` + "\n\ndata: [DONE]\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := newStack(t, oneUpstream(up.URL))
	e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"`+strings.Repeat("word ", 200)+`"}]}`)
	if e.UsageSource == usage.SourceUpstream && e.Usage.PromptTokens == 0 {
		t.Fatalf("billed %+v (%s): an unreadable prompt count was billed as 0 from the upstream", e.Usage, e.UsageSource)
	}
}

// TestAnErrorFrameWithUnreadableUsageReachesTheClient: an error frame
// that carries an unreadable usage and no choices was dropped as a usage
// chunk: the client never saw the upstream's error, and got a normal end.
func TestAnErrorFrameWithUnreadableUsageReachesTheClient(t *testing.T) {
	body := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]}` + "\n\n" +
		`data: {"error":{"message":"upstream overloaded","type":"server_error"},"usage":{"prompt_tokens":"n/a","completion_tokens":3}}` + "\n\ndata: [DONE]\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := newStack(t, oneUpstream(up.URL))
	_, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(got, "upstream overloaded") {
		t.Fatalf("the upstream's error frame never reached the client:\n%s", got)
	}
}

// TestAnErrorFrameWithUsageReachesTheClient: an error frame with a
// readable usage and no choices (OpenRouter's mid-stream error; the
// simulator's usage_in_error) was taken for a usage chunk: a client that
// had not asked for usage lost the error and saw a clean [DONE], and one
// that had got the error only at the end, as its usage chunk. The error
// reaches each as it arrives, the usage only the client that asked.
func TestAnErrorFrameWithUsageReachesTheClient(t *testing.T) {
	body := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","error":{"message":"upstream overloaded","type":"server_error"},"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}` + "\n\ndata: [DONE]\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := newStack(t, oneUpstream(up.URL))
	for _, includeUsage := range []bool{false, true} {
		req := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if includeUsage {
			req = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		e, got := doRequest(t, st, "/v1/chat/completions", req)
		var frames []string
		for _, line := range strings.Split(got, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				frames = append(frames, d)
			}
		}
		errAt := slices.IndexFunc(frames, func(f string) bool { return strings.Contains(f, "upstream overloaded") })
		switch {
		case errAt < 0:
			t.Fatalf("include_usage %v: the upstream's error frame never reached the client:\n%s", includeUsage, got)
		case strings.Contains(frames[errAt], `"usage"`):
			t.Errorf("include_usage %v: the error frame kept its usage (usage rides only in the usage chunk): %s", includeUsage, frames[errAt])
		case errAt+1 < len(frames) && frames[errAt+1] != "[DONE]" && !includeUsage:
			t.Errorf("include_usage false: after the error frame: %v", frames[errAt+1:])
		}
		if n := strings.Count(got, `"usage"`); includeUsage && n != 1 || !includeUsage && n != 0 {
			t.Errorf("include_usage %v: %d usage members in the stream:\n%s", includeUsage, n, got)
		}
		if e.Status != usage.StatusUpstreamError || e.UsageSource != usage.SourceUpstream || e.Usage.PromptTokens != 7 || e.Usage.CompletionTokens != 3 {
			t.Errorf("include_usage %v: event %s, %s, %+v; want upstream_error with the frame's usage (7, 3)", includeUsage, e.Status, e.UsageSource, e.Usage)
		}
	}
}
