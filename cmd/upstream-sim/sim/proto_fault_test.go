package sim_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

func TestAnthropicFaults(t *testing.T) {
	// sim-reasoning, max_tokens 8: 4 thinking, 4 text tokens in 4 chunks.
	body := anthBody("sim-reasoning", true, 8, "")
	full := sim.Usage{PromptTokens: 9, CompletionTokens: 8, ReasoningTokens: 4}
	for _, tc := range []struct {
		name, fault, userID string
		last                string // last event
		texts               int    // text deltas
		readErr             bool
		outcome             func(sim.RequestStats) int64
		billed              sim.Usage
	}{
		{"error_after", "error_after:1", "", "error", 1, false, func(r sim.RequestStats) int64 { return r.StreamError },
			sim.Usage{PromptTokens: 9, CompletionTokens: 4 + 1, ReasoningTokens: 4}},
		{"disconnect_after via user_id", "", "user-1;sim_fault=disconnect_after:2", "content_block_delta", 2, true,
			func(r sim.RequestStats) int64 { return r.Disconnected }, sim.Usage{PromptTokens: 9, CompletionTokens: 4 + 2, ReasoningTokens: 4}},
		{"error_after:99", "error_after:99", "", "error", 4, false, func(r sim.RequestStats) int64 { return r.StreamError }, full},
		{"no_done", "no_done", "", "message_delta", 4, false, func(r sim.RequestStats) int64 { return r.OK }, full},
		{"usage_in_finish", "usage_in_finish", "", "message_stop", 4, false, func(r sim.RequestStats) int64 { return r.OK }, full},
		{"header wins", "no_done", "sim_fault=error_after:0;sim_chunks=1", "message_delta", 1, false,
			func(r sim.RequestStats) int64 { return r.OK }, full},
	} {
		s, srv := start(t)
		b := body
		if tc.userID != "" {
			b = anthBody("sim-reasoning", true, 8, `,"metadata":{"user_id":"`+tc.userID+`"}`)
		}
		var hdr []string
		if tc.fault != "" {
			hdr = []string{"X-Sim-Fault", tc.fault}
		}
		_, data, err := postTo(t, context.Background(), srv, "/v1/messages", b, hdr...)
		if (err != nil) != tc.readErr {
			t.Errorf("%s: read error %v", tc.name, err)
		}
		st := parseAnth(t, data)
		if last := st.names[len(st.names)-1]; last != tc.last || st.nText != tc.texts || st.thinking != strings.Repeat("tok ", 4) {
			t.Errorf("%s: events %v, %d text deltas", tc.name, st.names, st.nText)
		}
		if tc.last == "error" {
			evs := anthEvents(t, data)
			if e := evs[len(evs)-1].Raw; !strings.Contains(e, `"type":"overloaded_error"`) || st.delta != nil {
				t.Errorf("%s: error event %s, message_delta %v", tc.name, e, st.delta)
			}
		}
		if stats := waitStats(t, s, 1); tc.outcome(stats.Requests) != 1 || stats.Usage() != tc.billed ||
			stats.ByProtocol.Anthropic != stats.Counts {
			t.Errorf("%s: stats %+v, want %+v", tc.name, stats.Counts, tc.billed)
		}
	}
}

func TestAnthropicNoUsage(t *testing.T) {
	s, srv := start(t)
	_, data, _ := postTo(t, context.Background(), srv, "/v1/messages", anthBody("sim-pro", true, 4, ""), "X-Sim-Fault", "no_usage")
	if st := parseAnth(t, data); strings.Contains(data, "usage") || st.names[len(st.names)-1] != "message_stop" || st.stop != "max_tokens" {
		t.Errorf("stream %s", data)
	}
	if st := waitStats(t, s, 1); st.Requests.OK != 1 || st.Usage() != (sim.Usage{PromptTokens: 9, CachedTokens: 4, CompletionTokens: 4, ReasoningTokens: 2}) {
		t.Errorf("stats %+v", st.Counts)
	}
}

func TestNewProtocolsStall(t *testing.T) {
	for _, tc := range []struct{ path, body, first string }{
		{"/v1/messages", anthBody("sim-pro", true, 8, ""), "event: message_start"},
		{gemPath("sim-pro"), gemBody(8, true, ""), `data: {"candidates": [{"content": {"parts": [{"text": "tok tok tok tok ","thought": true}]`},
		{gemPath("sim-pro"), gemBody(8, false, ""), ""}, // no opening frame: only the headers
	} {
		s, srv := start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		resp, data, err := postTo(t, ctx, srv, tc.path, tc.body, "X-Sim-Fault", "stall")
		cancel()
		if err == nil || resp.StatusCode != 200 || !strings.HasPrefix(data, tc.first) || strings.Contains(data, `"text": "tok "`) ||
			strings.Contains(data, "text_delta") {
			t.Errorf("%s: err %v, got %q", tc.path, err, data)
		}
		// Prompt and all reasoning are billed once the stream has started.
		want := sim.Usage{PromptTokens: 9, CachedTokens: 4, CompletionTokens: 4, ReasoningTokens: 4}
		if st := waitStats(t, s, 1); st.Requests.Stalled != 1 || st.Usage() != want {
			t.Errorf("%s: stats %+v", tc.path, st.Counts)
		}
	}
}

func TestGeminiFaults(t *testing.T) {
	full := sim.Usage{PromptTokens: 9, CompletionTokens: 3}
	for _, tc := range []struct {
		fault   string
		labels  string
		usage   string // usage per chunk: "-" absent, else candidatesTokenCount
		finish  bool   // the last chunk has finishReason
		errBody bool
		readErr bool
		outcome func(sim.RequestStats) int64
		billed  sim.Usage
	}{
		{"", "", "1 2 3", true, false, false, func(r sim.RequestStats) int64 { return r.OK }, full},
		{"cumulative_usage,no_done", "", "1 2 3", true, false, false, func(r sim.RequestStats) int64 { return r.OK }, full},
		{"no_usage", "", "- - -", true, false, false, func(r sim.RequestStats) int64 { return r.OK }, full},
		{"usage_in_finish", "", "- - 3", true, false, false, func(r sim.RequestStats) int64 { return r.OK }, full},
		{"error_after:1", "", "1", false, true, false, func(r sim.RequestStats) int64 { return r.StreamError },
			sim.Usage{PromptTokens: 9, CompletionTokens: 1}},
		{"", `{"sim_fault":"error_after:9"}`, "1 2 3", false, true, false, func(r sim.RequestStats) int64 { return r.StreamError }, full},
		{"disconnect_after:2", "", "1 2", false, false, true, func(r sim.RequestStats) int64 { return r.Disconnected },
			sim.Usage{PromptTokens: 9, CompletionTokens: 2}},
		{"", `{"sim_chunks":"1"}`, "3", true, false, false, func(r sim.RequestStats) int64 { return r.OK }, full},
	} {
		s, srv := start(t)
		extra := ""
		if tc.labels != "" {
			extra = `,"labels":` + tc.labels
		}
		var hdr []string
		if tc.fault != "" {
			hdr = []string{"X-Sim-Fault", tc.fault}
		}
		name := tc.fault + tc.labels
		_, data, err := postTo(t, context.Background(), srv, gemPath("sim-small"), gemBody(3, false, extra), hdr...)
		if (err != nil) != tc.readErr {
			t.Errorf("%s: read error %v", name, err)
		}
		st := parseGem(t, data)
		var got []string
		for _, c := range st.chunks {
			if u := c.UsageMetadata; u == nil {
				got = append(got, "-")
			} else {
				got = append(got, itoa(int(u.CandidatesTokenCount)))
			}
		}
		if strings.Join(got, " ") != tc.usage || (st.finish == "MAX_TOKENS") != tc.finish {
			t.Errorf("%s: usage per chunk %q finish %q", name, got, st.finish)
		}
		if tc.errBody {
			var e struct {
				Error struct {
					Code   int
					Status string
				}
			}
			if err := json.Unmarshal([]byte(st.trailing), &e); err != nil || e.Error.Code != 503 || e.Error.Status != "UNAVAILABLE" ||
				!strings.HasPrefix(st.trailing, "{\n  \"error\": {\n") || strings.Contains(st.trailing, "data:") {
				t.Errorf("%s: trailing %q", name, st.trailing)
			}
		} else if st.trailing != "" {
			t.Errorf("%s: trailing %q", name, st.trailing)
		}
		if stats := waitStats(t, s, 1); tc.outcome(stats.Requests) != 1 || stats.Usage() != tc.billed ||
			stats.ByProtocol.Gemini != stats.Counts {
			t.Errorf("%s: stats %+v, want %+v", name, stats.Counts, tc.billed)
		}
	}
}

func TestGeminiDisconnectAfterThoughts(t *testing.T) {
	s, srv := start(t)
	_, data, err := postTo(t, context.Background(), srv, gemPath("sim-reasoning"), gemBody(0, true, ""), "X-Sim-Fault", "disconnect_after:0")
	if st := parseGem(t, data); err == nil || len(st.chunks) != 1 || st.thought != strings.Repeat("tok ", 8) || st.text != "" {
		t.Errorf("err %v stream %q", err, data)
	}
	if st := waitStats(t, s, 1); st.Requests.Disconnected != 1 || st.Usage() != (sim.Usage{PromptTokens: 9, CompletionTokens: 8, ReasoningTokens: 8}) {
		t.Errorf("stats %+v", st.Counts)
	}
}
