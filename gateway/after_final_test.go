package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Ways around the late-output rule an attacker review found (an upstream
// that goes on after its final usage report, in fields or spellings a tap
// might not count, or with reports that reset what was counted). Each test
// fails when output reached the client that the event does not count.

var revWords = strings.Repeat("word ", 200) // 200 words

func anthEv(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// jsAnthropicWords counts the words a case-sensitive JSON client (JS/Python SDK) reads
// from the Anthropic SSE body: text_delta .text and content_block_start input.
func jsAnthropicWords(body string) int {
	n := 0
	for _, l := range strings.Split(body, "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(d), &m) != nil { // exact-key lookups below: case-sensitive like JS
			continue
		}
		if delta, ok := m["delta"].(map[string]any); ok {
			if s, ok := delta["text"].(string); ok {
				n += strings.Count(s, "word ")
			}
		}
		if cb, ok := m["content_block"].(map[string]any); ok {
			b, _ := json.Marshal(cb["input"])
			n += strings.Count(string(b), "word ")
		}
	}
	return n
}

func anthStart(out int) string {
	return anthEv("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":10,"output_tokens":`+itoa(out)+`}}}`)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

const anthDelta5 = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n"

func nativeAnthropic(t *testing.T, body string) (billed int64, src string, words int) {
	t.Helper()
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	b, _ := readAllErr(resp)
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	return e.Usage.CompletionTokens, string(e.UsageSource), jsAnthropicWords(string(b))
}

// After message_delta, text deltas whose "text" is shadowed by a
// case-variant key: encoding/json (case-insensitive, last wins) reads "",
// a JS/Python client reads the words. Nothing but the stream's end, pings
// and errors is relayed after the final report.
func TestNativeAnthropicCaseVariantTextAfterMessageDeltaIsNotRelayed(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
		anthDelta5 +
		strings.Repeat(anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+revWords+`","TEXT":""}}`), 50) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	billed, src, words := nativeAnthropic(t, body)
	t.Logf("client read %d words; billed completion=%d (%s)", words, billed, src)
	if int64(words) > billed {
		t.Fatalf("client read %d words after message_delta; billed completion %d (%s)", words, billed, src)
	}
}

// After message_delta, content_block_start tool_use blocks whose input
// (which the SDKs keep when no input_json_delta follows) carries the
// output: not relayed.
func TestNativeAnthropicToolInputAfterMessageDeltaIsNotRelayed(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
		anthDelta5
	for i := 1; i <= 50; i++ {
		body += anthEv("content_block_start", `{"type":"content_block_start","index":`+itoa(i)+`,"content_block":{"type":"tool_use","id":"t","name":"","input":{"x":"`+revWords+`"}}}`) +
			anthEv("content_block_stop", `{"type":"content_block_stop","index":`+itoa(i)+`}`)
	}
	body += anthEv("message_stop", `{"type":"message_stop"}`)
	billed, src, words := nativeAnthropic(t, body)
	t.Logf("client read %d words; billed completion=%d (%s)", words, billed, src)
	if int64(words) > billed {
		t.Fatalf("client read %d words after message_delta; billed completion %d (%s)", words, billed, src)
	}
}

// A second message_start after the output does not make that output
// counted (SetUsage): a stream with no message_delta bills the output the
// tokenizer counts, not message_start's placeholder.
func TestAnthropicSecondMessageStartDoesNotCountTheOutput(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		strings.Repeat(anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+revWords+`"}}`), 50) +
		anthStart(1) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	billed, src, words := nativeAnthropic(t, body)
	t.Logf("client read %d words; billed completion=%d (%s)", words, billed, src)
	if int64(words) > billed {
		t.Fatalf("client read %d words; billed completion %d (%s)", words, billed, src)
	}
}

// A message_start after the message_delta, or a message_delta before the
// message_start (a review): every message_start merged its usage over the
// figures, so message_delta's 500 output tokens became the later
// message_start's 1 (and its input 0), on both routes. Only the first
// readable message_start opens the count; message_delta overrides it,
// never the other way (DESIGN).
func TestAnthropicMessageStartDoesNotUndoMessageDelta(t *testing.T) {
	text := strings.Repeat("word ", 400)
	block := anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+text+`"}}`) +
		anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`)
	delta := anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":10,"output_tokens":500}}`)
	restart := anthEv("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":0,"output_tokens":1}}}`)
	stop := anthEv("message_stop", `{"type":"message_stop"}`)
	for name, body := range map[string]string{
		"message_start after message_delta":  anthStart(1) + block + delta + restart + stop,
		"message_delta before message_start": block + delta + restart + stop,
	} {
		if billed, src, _ := nativeAnthropic(t, body); billed != 500 || src != string(usage.SourceUpstream) {
			t.Errorf("%s, native: billed completion %d (%s), want message_delta's 500", name, billed, src)
		}
		st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
		e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+testKey)
		if e.Usage.CompletionTokens != 500 || e.Usage.PromptTokens != 10 || e.UsageSource != usage.SourceUpstream {
			t.Errorf("%s, chat: billed %+v (%s), want message_delta's 10 + 500", name, e.Usage, e.UsageSource)
		}
	}
}

// Chat route: message_delta (final), late output, then a second
// message_start: the late output is still counted.
func TestChatLateOutputThenMessageStartIsBilled(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
		anthDelta5 +
		strings.Repeat(anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+revWords+`"}}`), 50) +
		anthStart(1) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+testKey)
	words := strings.Count(got, "word ")
	t.Logf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	if int64(words) > e.Usage.CompletionTokens {
		t.Fatalf("chat: client read %d words after message_delta; billed %+v (%s)", words, e.Usage, e.UsageSource)
	}
}

// Gemini native: late chunks each repeating the same cumulative
// usageMetadata: a report that counts no more does not count them.
func TestGeminiLateChunksRepeatingUsageAreBilled(t *testing.T) {
	u := `"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}`
	body := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}],` + u + "}\r\n\r\n" +
		strings.Repeat(`data: {"candidates":[{"content":{"parts":[{"text":"`+revWords+`"}],"role":"model"},"index":0}],`+u+"}\r\n\r\n", 50)
	st := oneProviderStack(t, "gemini", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	words := strings.Count(got, "word ")
	t.Logf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	if int64(words) > e.Usage.CompletionTokens {
		t.Fatalf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	}
}

// Responses native: a response.in_progress whose response says status
// "completed" with usage (final), then .done events carrying text, then
// response.completed: nothing after the final report is relayed.
func TestResponsesEventsAfterAnEarlyFinalAreNotRelayed(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	body := ev("response.created", `{"type":"response.created","response":{"status":"in_progress","model":"m"}}`) +
		ev("response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`) +
		ev("response.in_progress", `{"type":"response.in_progress","response":{"status":"completed","usage":{"input_tokens":10,"output_tokens":5}}}`) +
		strings.Repeat(ev("response.output_text.done", `{"type":"response.output_text.done","text":"`+revWords+`"}`), 50) +
		ev("response.completed", `{"type":"response.completed","response":{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"`+strings.Repeat(revWords, 50)+`"}]}],"usage":{"input_tokens":10,"output_tokens":5}}}`)
	st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	words := 0 // words in the .done events alone, after the early final report
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, `"response.output_text.done"`) {
			words += strings.Count(l, "word ")
		}
	}
	t.Logf("client read %d words in .done events (+%d in response.completed); billed %+v (%s)", words, strings.Count(got, "word ")-words, e.Usage, e.UsageSource)
	if int64(words) > e.Usage.CompletionTokens {
		t.Fatalf("client read %d words after the final report; billed %+v (%s)", words, e.Usage, e.UsageSource)
	}
}

// Anthropic native stream without any usage (estimated): a tool's input
// given whole in content_block_start is counted.
func TestAnthropicToolInputInBlockStartIsEstimated(t *testing.T) {
	body := anthEv("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[]}}`) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"x":"`+strings.Repeat(revWords, 50)+`"}}}`) +
		anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	billed, src, words := nativeAnthropic(t, body)
	t.Logf("client read %d words; billed completion=%d (%s)", words, billed, src)
	if int64(words) > billed {
		t.Fatalf("client read %d words; billed completion %d (%s)", words, billed, src)
	}
}

// Gemini chat route (translated): late chunks after finish repeating usage.
func TestGeminiChatLateChunksRepeatingUsageAreBilled(t *testing.T) {
	u := `"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}`
	body := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}],` + u + "}\r\n\r\n" +
		strings.Repeat(`data: {"candidates":[{"content":{"parts":[{"text":"`+revWords+`"}],"role":"model"},"index":0}],`+u+"}\r\n\r\n", 50)
	st := oneProviderStack(t, "gemini", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	words := strings.Count(got, "word ")
	t.Logf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	if int64(words) > e.Usage.CompletionTokens {
		t.Fatalf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	}
}

// Gemini native (a review): text the tap did not read reached the client
// free, after the final report and without any: the code execution
// tool's parts (executableCode's code, codeExecutionResult's output), and
// a part whose "text" a case-variant key shadows for encoding/json
// ({"text":"…","TEXT":""}: Go reads "", the SDKs read the words). Both are
// counted now.
func TestGeminiOutputOutsideTextPartsIsCounted(t *testing.T) {
	u := `"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}`
	final := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}],` + u + "}\r\n\r\n"
	late := func(part string) string {
		return strings.Repeat(`data: {"candidates":[{"content":{"parts":[`+part+`],"role":"model"},"index":0}],`+u+"}\r\n\r\n", 20)
	}
	w := strings.Repeat("word ", 300)
	for name, body := range map[string]string{
		"late executableCode":      final + late(`{"executableCode":{"language":"PYTHON","code":"`+revWords+`"}}`),
		"late codeExecutionResult": final + late(`{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"`+revWords+`"}}`),
		"late shadowed text":       final + late(`{"text":"`+revWords+`","TEXT":""}`),
		"code parts, no usage": `data: {"candidates":[{"content":{"parts":[{"executableCode":{"language":"PYTHON","code":"` + w + `"}},{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"` + w + `"}}],"role":"model"},"index":0}]}` + "\r\n\r\n" +
			`data: {"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}]}` + "\r\n\r\n",
	} {
		st := oneProviderStack(t, "gemini", jsonUpstream(t, "text/event-stream", body).URL)
		resp := st.post(t, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
		b, _ := readAllErr(resp)
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		words := strings.Count(string(b), "word ")
		if words < 300 || e.Usage.CompletionTokens < int64(words) || e.UsageSource == usage.SourceUpstream {
			t.Errorf("%s: the client got %d words; billed completion %d (%s)", name, words, e.Usage.CompletionTokens, e.UsageSource)
		}
	}
}

// geminiChunk is one Gemini stream chunk of text, with a finishReason
// when finish is set, and usage counting cand candidates tokens.
func geminiChunk(text string, finish bool, cand int) string {
	reason := ""
	if finish {
		reason = `"finishReason":"STOP",`
	}
	return `data: {"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"},` + reason + `"index":0}],` +
		`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":` + itoa(cand) + `,"totalTokenCount":` + itoa(10+cand) + "}}\r\n\r\n"
}

// Late chunks that each carry a finishReason and repeat the count (as
// Vertex AI puts one on every chunk): their text is billed as late output.
// A chunk with a finishReason was taken to count its own text for a while
// (to bill Vertex's count exactly where its count did not move), and any
// upstream that added one to its late chunks streamed free (a review).
// Billing text the count does not cover is the safer side.
func TestGeminiLateChunksWithAFinishReasonAreBilled(t *testing.T) {
	body := geminiChunk("hi", true, 5) + strings.Repeat(geminiChunk(revWords, true, 5), 20)
	st := oneProviderStack(t, "gemini", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	if words := strings.Count(got, "word "); int64(words) > e.Usage.CompletionTokens {
		t.Fatalf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	}
}

// Late text after the final report, then a chunk with a finishReason
// repeating the count: the repeated report does not count the late text.
func TestGeminiLateTextThenARepeatedFinishIsBilled(t *testing.T) {
	body := geminiChunk("hi", true, 5) + strings.Repeat(geminiChunk(revWords, false, 5), 20) + geminiChunk("end", true, 5)
	st := oneProviderStack(t, "gemini", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	if words := strings.Count(got, "word "); int64(words) > e.Usage.CompletionTokens {
		t.Fatalf("client read %d words; billed %+v (%s)", words, e.Usage, e.UsageSource)
	}
}

// After message_delta, Anthropic's stream may close its content block,
// ping (with empty data, or as data alone) and report again before
// message_stop: all relayed, the stream ends cleanly and bills the
// report. They broke the stream off (a review).
func TestNativeAnthropicQuietEventsAfterMessageDeltaAreRelayed(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
		anthDelta5 +
		anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		anthEv("ping", `{}`) +
		"data: {\"type\":\"ping\"}\n\n" +
		anthDelta5 +
		anthEv("message_stop", `{"type":"message_stop"}`)
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	b, err := readAllErr(resp)
	if err != nil || string(b) != body {
		t.Fatalf("read error %v; body, not the upstream's:\n%s", err, b)
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Usage.CompletionTokens != 5 || e.UsageSource != "upstream" {
		t.Fatalf("billed %+v (%s); want 5 (upstream)", e.Usage, e.UsageSource)
	}
}

// A "ping" whose data also spells type another way is what encoding/json
// reads differently from a case-sensitive client: not relayed after the
// final report.
func TestNativeAnthropicPingSpelledTwiceAfterMessageDeltaIsNotRelayed(t *testing.T) {
	body := anthStart(1) + anthDelta5 +
		strings.Repeat(anthEv("ping", `{"type":"content_block_delta","Type":"ping","index":0,"delta":{"type":"text_delta","TEXT":"","text":"`+revWords+`"}}`), 20) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	billed, src, words := nativeAnthropic(t, body)
	if int64(words) > billed {
		t.Fatalf("client read %d words after message_delta; billed completion %d (%s)", words, billed, src)
	}
}

// After message_delta, events a case-sensitive client reads as text
// deltas that the tap (encoding/json: keys matched without regard to case,
// the last one kept) reads as an error, with a new message each time, or
// as the stream's end: not relayed. They passed as the error or the end
// they seemed (a review).
func TestNativeAnthropicEndOrErrorSpelledTwiceAfterMessageDeltaIsNotRelayed(t *testing.T) {
	errs := ""
	for i := range 20 {
		errs += anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+revWords+`"},"Type":"error","error":{"type":"e","message":"m`+itoa(i)+`"}}`)
	}
	for name, body := range map[string]string{
		"error": anthStart(1) + anthDelta5 + errs + anthEv("message_stop", `{"type":"message_stop"}`),
		"end": anthStart(1) + anthDelta5 +
			anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+strings.Repeat(revWords, 20)+`"},"Type":"message_stop"}`),
	} {
		t.Run(name, func(t *testing.T) {
			billed, src, words := nativeAnthropic(t, body)
			if int64(words) > billed {
				t.Fatalf("client read %d words after message_delta; billed completion %d (%s)", words, billed, src)
			}
		})
	}
}
