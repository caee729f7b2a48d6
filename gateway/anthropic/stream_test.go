package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// chunkJSON is what the tests read back from a translated payload.
type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// translation is what a stream's payloads add up to, or what its upstream
// events say they should.
type translation struct {
	content, reasoning string
	tools              []string // "id name arguments", in tool index order
	finish             []string
	errors             []string
}

// wantFinish is the finish_reason mapping, written out independently of
// finishReason.
var wantFinish = map[string]string{"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
	"max_tokens": "length", "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}

// expectTranslation reads a stream's upstream events generically.
func expectTranslation(t *testing.T, events []sse.Event) translation {
	var w translation
	var c strings.Builder
	tools, hasArgs := map[float64]int{}, map[float64]bool{}
	for _, ev := range events {
		var e map[string]any
		if json.Unmarshal(ev.Data, &e) != nil {
			continue
		}
		d, _ := e["delta"].(map[string]any)
		switch e["type"] {
		case "content_block_start":
			if b := e["content_block"].(map[string]any); b["type"] == "tool_use" {
				tools[e["index"].(float64)] = len(w.tools)
				w.tools = append(w.tools, fmt.Sprintf("%s %s ", b["id"], b["name"]))
			}
		case "content_block_delta":
			switch d["type"] {
			case "text_delta":
				c.WriteString(d["text"].(string))
			case "thinking_delta":
				w.reasoning += d["thinking"].(string)
			case "input_json_delta":
				if i, ok := tools[e["index"].(float64)]; ok {
					w.tools[i] += d["partial_json"].(string)
					hasArgs[e["index"].(float64)] = hasArgs[e["index"].(float64)] || d["partial_json"] != ""
				}
			}
		case "content_block_stop":
			// A call whose input is {} streams no fragment: its arguments
			// are "{}", as OpenAI streams them, never "" (not JSON).
			if i, ok := tools[e["index"].(float64)]; ok && !hasArgs[e["index"].(float64)] {
				w.tools[i] += "{}"
				hasArgs[e["index"].(float64)] = true
			}
		case "message_delta":
			if s, ok := d["stop_reason"].(string); ok {
				w.finish = append(w.finish, wantFinish[s])
			}
		case "error":
			w.errors = append(w.errors, e["error"].(map[string]any)["message"].(string))
		}
	}
	w.content = c.String()
	return w
}

// translate runs events through a Stream, checks every payload's framing,
// and returns what they add up to.
func translate(t *testing.T, events []sse.Event, r *tap.Report) translation {
	t.Helper()
	var got translation
	s := Chat{}.NewStream("chatcmpl-7", "anthropic/claude-x", 1733000000)
	var dst [][]byte
	n := 0
	for i := range events {
		dst = s.Event(&events[i], r, dst[:0])
		for _, p := range dst {
			n++
			var c chunkJSON
			if err := json.Unmarshal(p, &c); err != nil || !json.Valid(p) {
				t.Fatalf("payload %d invalid: %s", n, p)
			}
			if c.Usage != nil || string(p) == "[DONE]" {
				t.Fatalf("payload %d carries usage or [DONE]: %s", n, p)
			}
			if c.Error != nil {
				got.errors = append(got.errors, c.Error.Message)
				continue
			}
			if c.ID != "chatcmpl-7" || c.Object != "chat.completion.chunk" || c.Created != 1733000000 ||
				c.Model != "anthropic/claude-x" || len(c.Choices) != 1 || c.Choices[0].Index != 0 {
				t.Fatalf("payload %d framing: %s", n, p)
			}
			ch := c.Choices[0]
			if (n == 1) != (ch.Delta.Role != nil) {
				t.Fatalf("payload %d: the role chunk must come first, once: %s", n, p)
			}
			if ch.Delta.Content != nil {
				got.content += *ch.Delta.Content
			}
			if ch.Delta.ReasoningContent != nil {
				got.reasoning += *ch.Delta.ReasoningContent
			}
			for _, tc := range ch.Delta.ToolCalls {
				switch {
				case tc.ID != "" && tc.Index == len(got.tools) && tc.Type == "function":
					got.tools = append(got.tools, fmt.Sprintf("%s %s ", tc.ID, tc.Function.Name))
				case tc.ID == "" && tc.Index < len(got.tools):
					got.tools[tc.Index] += tc.Function.Arguments
				default:
					t.Fatalf("payload %d: bad tool call delta: %s", n, p)
				}
			}
			if ch.FinishReason != nil {
				got.finish = append(got.finish, *ch.FinishReason)
			}
		}
	}
	return got
}

// TestStreamFixtures translates every recorded stream and checks that the
// chunks carry the same text, reasoning, tool calls, finish reason and
// errors as the upstream events, and that the usage is tapped as by a Tap.
func TestStreamFixtures(t *testing.T) {
	for _, rec := range recordings(t) {
		t.Run(rec.name, func(t *testing.T) {
			var r, tr tap.Report
			got := translate(t, rec.events, &r)
			want := expectTranslation(t, rec.events)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Errorf("translation\n got %q\nwant %q", got, want)
			}
			var tp Tap
			for i := range rec.events {
				tp.Event(&rec.events[i], &tr)
			}
			if r.Usage != tr.Usage || r.Reported != tr.Reported || r.Final != tr.Final || r.Error != tr.Error ||
				r.FinishReason != tr.FinishReason || r.ServedModel != tr.ServedModel || r.Output.String() != tr.Output.String() {
				t.Errorf("stream report differs from the tp's: %+v vs %+v", r.Usage, tr.Usage)
			}
		})
	}
}

// TestStreamPayloads checks exact payloads for each kind of chunk.
func TestStreamPayloads(t *testing.T) {
	const pre = `{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m\"x","choices":[{"index":0,"delta":`
	events := stream(
		`content_block_delta: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\u2028<b>\u0001\ud83d\ude00"}}`,
		`content_block_start: {"type":"content_block_start","index":3,"content_block":{"type":"server_tool_use","id":"s","name":"web_search"}}`,
		`content_block_delta: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"q\":1}"}}`,
		`content_block_start: {"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"t","name":"f"}}`,
		`content_block_delta: {"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}`,
		`message_delta: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`,
		`error: {"type":"error","error":{"type":"overloaded_error","message":"Over \"loaded\""}}`,
	)
	want := []string{
		pre + `{"role":"assistant","content":""},"finish_reason":null}]}`,
		pre + `{"content":"a\u2028<b>\u0001😀"},"finish_reason":null}]}`,
		pre + `{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`,
		pre + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]},"finish_reason":null}]}`,
		pre + `{},"finish_reason":"tool_calls"}]}`,
		`{"error":{"message":"Over \"loaded\"","type":"overloaded_error","code":null}}`,
	}
	s := Chat{}.NewStream("c1", `m"x`, 5)
	var r tap.Report
	var got [][]byte
	for i := range events {
		got = s.Event(&events[i], &r, got)
	}
	if len(got) != len(want) {
		t.Fatalf("%d payloads, want %d: %q", len(got), len(want), got)
	}
	for i := range got {
		if string(got[i]) != want[i] {
			t.Errorf("payload %d\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// Text and thinking that a content_block_start carries whole (Anthropic
// streams them empty there; compatible servers may not) reach the client
// as content and reasoning_content, as the tap bills them.
func TestStreamBlockStartTextAndThinking(t *testing.T) {
	events := stream(
		`content_block_start: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"plan"}}`,
		`content_block_start: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}`,
	)
	var r tap.Report
	got := translate(t, events, &r)
	if got.reasoning != "plan" || got.content != "Hi" {
		t.Errorf("reasoning %q, content %q; want plan, Hi", got.reasoning, got.content)
	}
}
