package anthropic

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestTapFixtures replays every recorded Anthropic stream through a Tap and
// checks the resolved usage against expected.json.
func TestTapFixtures(t *testing.T) {
	est := estimator(t)
	for _, rec := range recordings(t) {
		t.Run(rec.name, func(t *testing.T) {
			var tp Tap
			var r tap.Report
			for i := range rec.events {
				tp.Event(&rec.events[i], &r)
			}
			checkResolved(t, &r, est, rec.want)
		})
	}
}

func checkResolved(t *testing.T, r *tap.Report, est *tap.Estimator, want fixture.Expected) {
	t.Helper()
	u, src := r.Resolve(est, tap.Text(""))
	if src != want.Source {
		t.Errorf("usage_source %q, want %q", src, want.Source)
	}
	if got := r.Error != ""; got != want.UpstreamError {
		t.Errorf("upstream error %v (%q), want %v", got, r.Error, want.UpstreamError)
	}
	switch want.Source {
	case usage.SourceUpstream:
		w := usage.Tokens{PromptTokens: want.PromptTokens, CachedTokens: want.CachedTokens,
			CacheWriteTokens: want.CacheWriteTokens, CompletionTokens: want.CompletionTokens,
			ReasoningTokens: want.ReasoningTokens, WebSearchRequests: want.WebSearchRequests}
		if u != w {
			t.Errorf("usage %+v\n want %+v", u, w)
		}
		if u.Total() != want.TotalTokens {
			t.Errorf("total %d, want %d", u.Total(), want.TotalTokens)
		}
	case usage.SourcePartial:
		if u.PromptTokens != want.PromptTokens || u.CompletionTokens < want.CompletionTokensAtLeast {
			t.Errorf("usage %+v, want prompt %d and completion >= %d", u, want.PromptTokens, want.CompletionTokensAtLeast)
		}
	case usage.SourceEstimated:
		if u.PromptTokens < 0 || u.CompletionTokens < 0 {
			t.Errorf("negative estimate %+v", u)
		}
	default:
		t.Fatalf("expected.json source %q", want.Source)
	}
}

// TestTapRules covers each billing rule with a handwritten stream.
func TestTapRules(t *testing.T) {
	start := `message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"cache_creation_input_tokens":3,"cache_read_input_tokens":5,"output_tokens":2}}}`
	for _, c := range []struct {
		name   string
		events []sse.Event
		want   usage.Tokens
		rep    tap.Report // Reported, Final, FinishReason, ServedModel, Error
		output string
	}{
		{"start opens, not final", stream(start),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 2},
			tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"delta overrides, never adds", stream(start,
			`message_delta: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":20,"cache_read_input_tokens":0,"output_tokens":7}}`),
			usage.Tokens{PromptTokens: 23, CachedTokens: 0, CacheWriteTokens: 3, CompletionTokens: 7},
			tap.Report{Reported: true, Final: true, FinishReason: "stop", ServedModel: "claude-x"}, ""},
		{"legacy delta: output only", stream(start,
			`message_delta: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 9},
			tap.Report{Reported: true, Final: true, FinishReason: "length", ServedModel: "claude-x"}, ""},
		{"iterations summed, thinking and web search", stream(start,
			`data:{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":1,"output_tokens":4,"output_tokens_details":{"thinking_tokens":2},"server_tool_use":{"web_search_requests":3},"iterations":[{"input_tokens":100,"output_tokens":50,"cache_read_input_tokens":7,"type":"compaction"},{"input_tokens":1,"output_tokens":4,"cache_creation_input_tokens":2,"type":"message"}]}}`),
			usage.Tokens{PromptTokens: 110, CachedTokens: 7, CacheWriteTokens: 2, CompletionTokens: 54, ReasoningTokens: 2, WebSearchRequests: 3},
			tap.Report{Reported: true, Final: true, FinishReason: "tool_calls", ServedModel: "claude-x"}, ""},
		{"error before start", stream(`error: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			usage.Tokens{}, tap.Report{FinishReason: "error", Error: "overloaded_error: Overloaded"}, ""},
		{"error data without event line, after stop", stream(start,
			`message_delta: {"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":3}}`,
			`data:{"type":"error","error":"odd"}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 3},
			tap.Report{Reported: true, Final: true, FinishReason: "content_filter", ServedModel: "claude-x",
				Error: "api_error: upstream sent an error event"}, ""},
		{"unreadable error event", stream(`error: {oops`), usage.Tokens{},
			tap.Report{FinishReason: "error", Error: "api_error: upstream sent an error event"}, ""},
		{"output text for estimates", stream(start,
			`content_block_start: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"get"}}`,
			`content_block_delta: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`,
			`content_block_delta: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}`,
			`content_block_delta: {"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"hm"}}`,
			`content_block_delta: {"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"SIG"}}`,
			`ping: {"type": "ping"}`, `whatever: {"type":"future_event"}`, `content_block_delta: not json`,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":-5,"input_tokens":"x"}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 2},
			tap.Report{Reported: true, ServedModel: "claude-x"}, `get{"a":1}Hihm`},
		{"a negative figure is unreadable: the last stands, not final", stream(start,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":-5,"input_tokens":null}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 2},
			tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"integral floats, exponents and quoted integers are read", stream(start,
			`message_delta: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":"20","cache_read_input_tokens":0.0,"output_tokens":150.0,"server_tool_use":{"web_search_requests":1e0}}}`),
			usage.Tokens{PromptTokens: 23, CacheWriteTokens: 3, CompletionTokens: 150, WebSearchRequests: 1},
			tap.Report{Reported: true, Final: true, FinishReason: "stop", ServedModel: "claude-x"}, ""},
		{"a float elsewhere in message_delta keeps its usage", stream(start,
			`message_delta: {"type":"message_delta","index":1.5,"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":150}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 150},
			tap.Report{Reported: true, Final: true, FinishReason: "stop", ServedModel: "claude-x"}, ""},
		{"a field of the wrong type in message_start keeps its usage", stream(
			`message_start: {"type":"message_start","message":{"model":"claude-x","content":{},"usage":{"input_tokens":10,"output_tokens":1}}}`),
			usage.Tokens{PromptTokens: 10, CompletionTokens: 1}, tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"a fractional figure is unreadable", stream(start,
			`message_delta: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":150.5}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 2},
			tap.Report{Reported: true, FinishReason: "stop", ServedModel: "claude-x"}, ""},
		{"usage that is not an object: the last stands, not final", stream(start,
			`message_delta: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":"150"}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 2},
			tap.Report{Reported: true, FinishReason: "stop", ServedModel: "claude-x"}, ""},
		{"an unreadable nested object is not final", stream(start,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":7,"server_tool_use":[1]}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 7},
			tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"an unreadable iteration is not final", stream(start,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":7,"iterations":[{"input_tokens":1,"output_tokens":"many"}]}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 7},
			tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"iterations that are not an array of objects are not final", stream(start,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":7,"output_tokens_details":"x","iterations":[5]}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 7},
			tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"readable iterations after unreadable ones are final", stream(start,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":7,"iterations":{}}}`,
			`message_delta: {"type":"message_delta","usage":{"iterations":[{"input_tokens":4,"output_tokens":8}]}}`),
			usage.Tokens{PromptTokens: 4, CompletionTokens: 8},
			tap.Report{Reported: true, Final: true, ServedModel: "claude-x"}, ""},
		{"an unreadable start is no report; a delta overriding it is final", stream(
			`message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"output_tokens":-1}}}`,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":7}}`),
			usage.Tokens{PromptTokens: 10, CompletionTokens: 7}, tap.Report{Reported: true, Final: true, ServedModel: "claude-x"}, ""},
		{"a delta that does not count the output is not final", stream(start,
			`message_delta: {"type":"message_delta","usage":{"input_tokens":10,"output_tokens":null}}`),
			usage.Tokens{PromptTokens: 18, CachedTokens: 5, CacheWriteTokens: 3, CompletionTokens: 2}, tap.Report{Reported: true, ServedModel: "claude-x"}, ""},
		{"an unreadable start figure the delta does not carry is not final", stream(
			`message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":"ten","output_tokens":1}}}`,
			`message_delta: {"type":"message_delta","usage":{"output_tokens":7}}`),
			usage.Tokens{CompletionTokens: 7}, tap.Report{ServedModel: "claude-x"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tp Tap
			var r tap.Report
			for i := range c.events {
				tp.Event(&c.events[i], &r)
			}
			if r.Usage != c.want {
				t.Errorf("usage %+v\n want %+v", r.Usage, c.want)
			}
			if r.Reported != c.rep.Reported || r.Final != c.rep.Final || r.FinishReason != c.rep.FinishReason ||
				r.ServedModel != c.rep.ServedModel || r.Error != c.rep.Error {
				t.Errorf("report reported=%v final=%v finish=%q model=%q error=%q\nwant reported=%v final=%v finish=%q model=%q error=%q",
					r.Reported, r.Final, r.FinishReason, r.ServedModel, r.Error,
					c.rep.Reported, c.rep.Final, c.rep.FinishReason, c.rep.ServedModel, c.rep.Error)
			}
			if got := r.Output.String(); got != c.output {
				t.Errorf("output %q, want %q", got, c.output)
			}
		})
	}
}

func TestFinishReason(t *testing.T) {
	for stop, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
		"model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter",
		"something_new": "stop",
	} {
		if got := finishReason(stop); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", stop, got, want)
		}
	}
}
