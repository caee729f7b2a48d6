package anthropic

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// response is a non-streamed Messages response with thinking, text, a
// server tool, a client tool call, prompt caching and compaction
// iterations.
const response = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6",
 "content":[{"type":"compaction","content":"summary"},
  {"type":"thinking","thinking":"Let me see.","signature":"sig"},
  {"type":"text","text":"Looking"},{"type":"server_tool_use","id":"srv","name":"web_search","input":{"query":"q"}},
  {"type":"web_search_tool_result","tool_use_id":"srv","content":[]},
  {"type":"text","text":" it up.","citations":[]},
  {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{ "city": "Oslo" }}],
 "stop_reason":"tool_use","stop_sequence":null,
 "usage":{"input_tokens":20,"cache_creation_input_tokens":1,"cache_read_input_tokens":0,"output_tokens":9,
  "server_tool_use":{"web_search_requests":1},
  "iterations":[{"type":"compaction","input_tokens":1000,"cache_read_input_tokens":500,"output_tokens":80},
   {"type":"message","input_tokens":20,"cache_creation_input_tokens":1,"output_tokens":9}]}}`

func TestBody(t *testing.T) {
	var r tap.Report
	got, err := Chat{}.Body([]byte(response), "chatcmpl-1", "anthropic/claude", 1733000000, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"anthropic/claude",
	 "choices":[{"index":0,"message":{"role":"assistant","content":"Looking it up.","reasoning_content":"Let me see.",
	   "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
	   "logprobs":null,"finish_reason":"tool_calls"}],
	 "usage":{"prompt_tokens":1521,"completion_tokens":89,"total_tokens":1610,
	   "prompt_tokens_details":{"cached_tokens":500,"cache_write_tokens":1},"completion_tokens_details":{"reasoning_tokens":0}}}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	wantU := usage.Tokens{PromptTokens: 1521, CachedTokens: 500, CacheWriteTokens: 1, CompletionTokens: 89, WebSearchRequests: 1}
	if !r.Reported || !r.Final || r.Usage != wantU || r.FinishReason != "tool_calls" || r.ServedModel != "claude-sonnet-4-6" {
		t.Errorf("report %+v final=%v finish=%q model=%q", r.Usage, r.Final, r.FinishReason, r.ServedModel)
	}
	if out := r.Output.String(); !strings.Contains(out, "Let me see.") || !strings.Contains(out, "get_weather") {
		t.Errorf("output %q", out)
	}
}

func TestBodyEdges(t *testing.T) {
	var r tap.Report
	got, err := Chat{}.Body([]byte(`{"type":"message","content":[],"stop_reason":"max_tokens"}`), "c", "m", 1, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
	  "message":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"length"}]}`
	if !jsonEqual(t, got, []byte(want)) || r.Reported {
		t.Errorf("no usage: got %s (reported %v)", got, r.Reported)
	}

	r = tap.Report{}
	_, err = Chat{}.Body([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "c", "m", 1, &r)
	if err == nil || r.Error != "overloaded_error: Overloaded" || r.FinishReason != "error" {
		t.Errorf("error body: err %v, report error %q finish %q", err, r.Error, r.FinishReason)
	}
	r = tap.Report{}
	if _, err := (Chat{}).Body([]byte(`[`), "c", "m", 1, &r); err == nil || r.Error != "" {
		t.Errorf("invalid body: err %v, report error %q", err, r.Error)
	}
	r = tap.Report{}
	if err := BodyUsage([]byte(`{"usage":{"input_tokens":"x"},"content":[{"type":"text","text":"hi"}]}`), &r); err != nil || r.Reported || r.Final || r.Output.String() != "hi" {
		t.Errorf("BodyUsage took an unreadable usage as reported (%v, %v) or failed: %v", r.Reported, r.Final, err)
	}
	r = tap.Report{}
	if err := BodyUsage([]byte(`{"usage":{"input_tokens":"12","output_tokens":3.0}}`), &r); err != nil || !r.Final ||
		r.Usage != (usage.Tokens{PromptTokens: 12, CompletionTokens: 3}) {
		t.Errorf("BodyUsage read %+v (final %v, %v) from lenient counts", r.Usage, r.Final, err)
	}
}

func TestPromptText(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"Sys"}],
	 "messages":[{"role":"user","content":"Hello"},
	  {"role":"assistant","content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"42"}]},
	    {"type":"tool_result","tool_use_id":"t","content":"43"},{"type":"image","source":{"type":"url","url":"https://x"}}]}],
	 "tools":[{"name":"f","input_schema":{"type":"object"}}]}`
	want := "Sys\nHello\nHi\nf\n{\"a\":1}\n42\n43\n" + `{"name":"f","input_schema":{"type":"object"}}`
	if got := PromptText([]byte(body)); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := PromptText([]byte(`{"system":"S","messages":[{"content":"u"}]}`)); got != "S\nu" {
		t.Errorf("string system: %q", got)
	}
	if got := PromptText([]byte(`nope`)); got != "" {
		t.Errorf("invalid body: %q", got)
	}
	// A translated request's prompt text holds what the client sent.
	_, up, err := Chat{}.Request([]byte(`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`), "m", false)
	if err != nil || PromptText(up) != "Be brief.\nHi" {
		t.Errorf("translated: %q, %v", PromptText(up), err)
	}
}

// An answer of tool calls alone has content null, as OpenAI's, and a
// tool_use whose input is null has the arguments {}, a JSON object.
func TestBodyToolCallsAlone(t *testing.T) {
	var r tap.Report
	got, err := Chat{}.Body([]byte(`{"type":"message","content":[{"type":"tool_use","id":"t1","name":"now","input":null}],"stop_reason":"tool_use"}`), "c", "m", 1, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
	  "message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"now","arguments":"{}"}}]},
	  "logprobs":null,"finish_reason":"tool_calls"}]}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// gifOf returns the base64 of a GIF header of width w and height h: all
// that imageTokens reads of an image.
func gifOf(w, h int) string {
	b := []byte("GIF89a")
	b = append(b, byte(w), byte(w>>8), byte(h), byte(h>>8), 0, 0, 0)
	return base64.StdEncoding.EncodeToString(b)
}

// Prompt counts the system prompt as a message, and each image at
// ⌈w×h/750⌉ tokens, at most 1,600 (Anthropic resizes a larger one).
func TestPromptCountsSystemAndImages(t *testing.T) {
	body := `{"system":"S","messages":[{"role":"user","content":[
	  {"type":"image","source":{"type":"base64","media_type":"image/gif","data":"` + gifOf(3000, 3000) + `"}},
	  {"type":"image","source":{"type":"base64","media_type":"image/gif","data":"` + gifOf(30, 50) + `"}}]},
	 {"role":"assistant","content":"ok"}]}`
	p := Prompt([]byte(body))
	if p.Messages != 3 || p.Media != maxImageTokens+2 {
		t.Errorf("messages %d, media %d; want 3 and %d", p.Messages, p.Media, maxImageTokens+2)
	}
}
