package sim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// anthBody is a Messages request; its prompt is 3 + 4 + 2 = 9 tokens.
func anthBody(model string, stream bool, maxTokens int, extra string) string {
	b := `{"model":"` + model + `","max_tokens":` + strconv.Itoa(maxTokens) +
		`,"messages":[{"role":"user","content":"say hi"}]`
	if stream {
		b += `,"stream":true`
	}
	return b + extra + "}"
}

func TestAnthropicStream(t *testing.T) {
	s, srv := start(t)
	body := anthBody("sim-pro", true, 8, `,"system":"be brief","metadata":{"user_id":"sim_chunks=2"}`)
	resp, data, err := postTo(t, context.Background(), srv, "/anthropic/v1/messages", body)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, err %v, %q", resp.StatusCode, err, resp.Header.Get("Content-Type"))
	}
	st := parseAnth(t, data)
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(st.names, " "); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	// prompt 3 + (4+2) + (4+2) = 15, cache read 7; 8 tokens: 4 thinking, 4 text.
	if st.start != (anthUsage{InputTokens: 8, CacheReadInputTokens: 7, OutputTokens: 1}) {
		t.Errorf("message_start usage %+v", st.start)
	}
	if st.delta == nil || *st.delta != (anthUsage{InputTokens: 8, CacheReadInputTokens: 7, OutputTokens: 8}) || st.stop != "max_tokens" {
		t.Errorf("message_delta usage %+v stop %q", st.delta, st.stop)
	}
	if st.thinking != strings.Repeat("tok ", 4) || st.text != strings.Repeat("tok ", 4) || st.nText != 2 {
		t.Errorf("thinking %q text %q in %d deltas", st.thinking, st.text, st.nText)
	}
	expected, err := sim.ExpectedAnthropicUsage([]byte(body))
	if got := st.delta.usage(words(st.thinking)); err != nil || got != expected {
		t.Errorf("usage %+v, expected %+v (%v)", got, expected, err)
	}
	if !strings.Contains(data, `"id":"`+sim.ResponseID(sim.Anthropic, []byte(body))+`"`) {
		t.Error("message id is not ResponseID")
	}

	// Non-streamed: the same usage and content.
	nbody := strings.Replace(body, `,"stream":true`, "", 1)
	resp, data, _ = postTo(t, context.Background(), srv, "/v1/messages", nbody)
	var m struct {
		Type, Role, Model string
		Content           []struct{ Type, Text, Thinking, Signature string }
		StopReason        string    `json:"stop_reason"`
		Usage             anthUsage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil || resp.StatusCode != 200 || len(m.Content) != 2 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if m.Type != "message" || m.Role != "assistant" || m.Model != "sim-pro" || m.StopReason != "max_tokens" ||
		m.Content[0].Thinking != st.thinking || m.Content[0].Signature != sim.ThinkingSignature ||
		m.Content[1].Type != "text" || m.Content[1].Text != st.text || m.Usage != *st.delta {
		t.Errorf("message %+v", m)
	}
	checkSimProTwice(t, s, sim.Anthropic)
}

func TestAnthropicProfiles(t *testing.T) {
	_, srv := start(t)
	for _, tc := range []struct {
		model             string
		maxTokens         int
		stop              string
		completion        int64
		cached, reasoning int64
	}{
		{"sim-small", 100, "end_turn", 16, 0, 0},
		{"sim-small", 5, "max_tokens", 5, 0, 0},
		{"sim-small", 16, "end_turn", 16, 0, 0},
		{"sim-cache", 8, "max_tokens", 8, 4, 0},
		{"claude-reasoner", 1024, "end_turn", 16, 0, 8},
		{"sim-pro", 9, "max_tokens", 9, 4, 4},
	} {
		body := anthBody(tc.model, true, tc.maxTokens, "")
		_, data, _ := postTo(t, context.Background(), srv, "/v1/messages", body)
		st := parseAnth(t, data)
		want := sim.Usage{PromptTokens: 9, CachedTokens: tc.cached, CompletionTokens: tc.completion, ReasoningTokens: tc.reasoning}
		expected, _ := sim.ExpectedAnthropicUsage([]byte(body))
		if st.delta == nil || st.delta.usage(words(st.thinking)) != want || expected != want || st.stop != tc.stop ||
			words(st.text) != tc.completion-tc.reasoning || (tc.reasoning > 0) != strings.Contains(data, "thinking_delta") {
			t.Errorf("%s/%d: delta %+v thinking %q stop %q, want %+v %s", tc.model, tc.maxTokens, st.delta, st.thinking, st.stop, want, tc.stop)
		}
	}
}

func TestAnthropicPromptRule(t *testing.T) {
	const msg = `"messages":[{"role":"user","content":"say hi"}]`
	for _, tc := range []struct {
		fields string
		want   int64
	}{
		{msg, 9},
		{`"system":"a b c",` + msg, 9 + 4 + 3},
		{`"system":[{"type":"text","text":"a b"},{"type":"text","text":"c"}],` + msg, 9 + 4 + 3},
		{`"system":null,` + msg, 9},
		{`"system":"",` + msg, 9 + 4},
		{`"messages":[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"image","source":{"data":"x y"}}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"x y z"},{"type":"text","text":"c"}]}]`, 3 + 6 + 5},
	} {
		u, err := sim.ExpectedAnthropicUsage([]byte(`{"model":"m","max_tokens":4,` + tc.fields + `}`))
		if err != nil || u.PromptTokens != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.fields, u.PromptTokens, err, tc.want)
		}
	}
}

func TestAnthropicErrors(t *testing.T) {
	s, srv := start(t)
	type envelope struct {
		Type  string
		Error struct{ Type, Message string }
	}
	check := func(name string, resp *http.Response, data string, status int, typ string) {
		t.Helper()
		var e envelope
		if err := json.Unmarshal([]byte(data), &e); err != nil || resp.StatusCode != status || e.Type != "error" ||
			e.Error.Type != typ || e.Error.Message == "" {
			t.Errorf("%s: status %d body %s, want %d %s", name, resp.StatusCode, data, status, typ)
		}
	}
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`, // no max_tokens
		`{"max_tokens":4,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":4,"messages":[]}`,
		`{"model":"m","max_tokens":4,"system":5,"messages":[{"role":"user","content":"x"}]}`,
		anthBody("m", true, 4, `,"metadata":{"user_id":"sim_fault=cumulative_usage"}`),
		anthBody("m", true, 4, `,"metadata":{"user_id":"sim_chunks=0"}`),
		`not json`,
	} {
		resp, data, _ := postTo(t, context.Background(), srv, "/v1/messages", body)
		check(body, resp, data, 400, "invalid_request_error")
	}
	for _, tc := range []struct {
		status int
		typ    string
	}{{529, "overloaded_error"}, {429, "rate_limit_error"}, {401, "authentication_error"}, {500, "api_error"}} {
		resp, data, _ := postTo(t, context.Background(), srv, "/v1/messages", anthBody("sim-pro", true, 4, ""), "X-Sim-Status", strconv.Itoa(tc.status))
		check(strconv.Itoa(tc.status), resp, data, tc.status, tc.typ)
	}
	resp, data, _ := postTo(t, context.Background(), srv, "/anthropic/v1/nope", "{}")
	check("404", resp, data, 404, "not_found_error")
	st := s.Stats()
	if a := st.ByProtocol.Anthropic.Requests; a.BadRequest != 8 || a.Status != 4 || a.Total != 12 || st.Usage() != (sim.Usage{}) {
		t.Errorf("stats %+v", st)
	}
}
