package sim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// TestServedModel: sim_served_model is the model every OpenAI chunk and
// completion reports, JSON-escaped (a NUL as \u0000), from the body's
// metadata or the header; the usage profile and /stats follow the model
// asked for.
func TestServedModel(t *testing.T) {
	const served = "sim-pro\x00evil"
	want := sim.Usage{PromptTokens: prompt, CachedTokens: prompt / 2, CompletionTokens: 8, ReasoningTokens: 4}
	for _, tc := range []struct {
		name, body string
		hdr        []string
		want       string
	}{
		{"stream, metadata", chatBody("sim-pro", true, true, `,"max_tokens":8,"metadata":{"sim_served_model":"sim-pro\u0000evil"}`), nil, served},
		{"unary, metadata", chatBody("sim-pro", false, false, `,"max_tokens":8,"metadata":{"sim_served_model":"sim-pro\u0000evil"}`), nil, served},
		{"stream, header", chatBody("sim-pro", true, true, `,"max_tokens":8`), []string{"X-Sim-Served-Model", "gpt-4o-2024"}, "gpt-4o-2024"},
		{"invalid UTF-8", chatBody("sim-pro", true, false, `,"max_tokens":8`), []string{"X-Sim-Served-Model", "bad\xffname"}, "bad\uFFFDname"},
	} {
		s, srv := start(t)
		_, data, err := post(t, srv, tc.body, tc.hdr...)
		if err != nil {
			t.Fatal(tc.name, err)
		}
		if tc.want == served && !strings.Contains(data, `"model":"sim-pro\u0000evil"`) {
			t.Errorf("%s: the NUL is not escaped as \\u0000: %s", tc.name, data)
		}
		var models []string
		if strings.HasPrefix(data, "data: ") {
			for _, c := range parseStream(t, data).chunks {
				models = append(models, c.Model)
			}
		} else {
			models = append(models, decode(t, data).Model)
		}
		for _, m := range models {
			if m != tc.want {
				t.Errorf("%s: model %q, want %q", tc.name, m, tc.want)
			}
		}
		if st := waitStats(t, s, 1); st.Requests.OK != 1 || st.Usage() != want {
			t.Errorf("%s: stats %+v, want %+v", tc.name, st.Counts, want)
		}
	}
}

// TestServedModelOtherProtocols: Anthropic's message model and Gemini's
// modelVersion report sim_served_model too.
func TestServedModelOtherProtocols(t *testing.T) {
	_, srv := start(t)
	_, data, err := postTo(t, context.Background(), srv, "/v1/messages",
		anthBody("sim-pro", true, 8, `,"metadata":{"user_id":"u;sim_served_model=claude\u0000x"}`))
	if err != nil || !strings.Contains(data, `"model":"claude\u0000x"`) {
		t.Errorf("anthropic (%v): %s", err, data)
	}
	_, data, err = postTo(t, context.Background(), srv, gemPath("sim-pro"), gemBody(8, false, `,"labels":{"sim_served_model":"gemini\u0000x"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parseGem(t, data).chunks {
		if c.ModelVersion != "gemini\x00x" {
			t.Errorf("gemini modelVersion %q", c.ModelVersion)
		}
	}
}

// TestFaultNegativeUsage: under negative_usage every OpenAI usage object
// reports each count negated, while /stats bills the real usage; the
// other protocols are unaffected.
func TestFaultNegativeUsage(t *testing.T) {
	// sim-pro, 10 tokens: 5 reasoning, 5 content in 5 chunks.
	full := sim.Usage{PromptTokens: prompt, CachedTokens: prompt / 2, CompletionTokens: 10, ReasoningTokens: 5}
	neg := sim.Usage{PromptTokens: -prompt, CachedTokens: -(prompt / 2), CompletionTokens: -10, ReasoningTokens: -5}
	for _, tc := range []struct {
		name, body, fault string
		billed            sim.Usage
		want              []sim.Usage // the usage objects, in order
	}{
		{"usage chunk", chatBody("sim-pro", true, true, `,"max_tokens":10`), "negative_usage", full, []sim.Usage{neg}},
		{"unary", chatBody("sim-pro", false, false, `,"max_tokens":10`), "negative_usage", full, []sim.Usage{neg}},
		{"usage_in_finish", chatBody("sim-pro", true, false, `,"max_tokens":10`), "negative_usage,usage_in_finish", full, []sim.Usage{neg}},
		{"cumulative", chatBody("sim-pro", true, false, `,"max_tokens":10,"metadata":{"sim_chunks":"1"}`), "negative_usage,cumulative_usage", full,
			[]sim.Usage{{-prompt, -(prompt / 2), -5, -5}, {-prompt, -(prompt / 2), -10, -5}, neg}},
		{"usage_in_error", chatBody("sim-pro", true, false, `,"max_tokens":10`), "negative_usage,error_after:2,usage_in_error",
			sim.Usage{prompt, prompt / 2, 7, 5}, []sim.Usage{{-prompt, -(prompt / 2), -7, -5}}},
	} {
		s, srv := start(t)
		_, data, err := post(t, srv, tc.body, "X-Sim-Fault", tc.fault)
		if err != nil {
			t.Fatal(tc.name, err)
		}
		var got []sim.Usage
		payloads := []string{data}
		if strings.HasPrefix(data, "data: ") {
			payloads = frames(t, data)
		}
		for _, f := range payloads {
			if f == "[DONE]" {
				continue
			}
			if c := decode(t, f); c.Usage != nil {
				got = append(got, c.Usage.usage(t))
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: usage objects %+v, want %+v", tc.name, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: usage object %d is %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
		if st := waitStats(t, s, 1); st.Usage() != tc.billed {
			t.Errorf("%s: /stats billed %+v, want %+v", tc.name, st.Usage(), tc.billed)
		}
	}
	_, srv := start(t)
	_, data, _ := postTo(t, context.Background(), srv, "/v1/messages", anthBody("sim-pro", true, 8, ""), "X-Sim-Fault", "negative_usage")
	if strings.Contains(data, `:-`) {
		t.Errorf("anthropic reports a negative count: %s", data)
	}
	_, data, _ = postTo(t, context.Background(), srv, gemPath("sim-pro"), gemBody(8, false, ""), "X-Sim-Fault", "negative_usage")
	if strings.Contains(data, `: -`) || parseGem(t, data).final(t).PromptTokens != prompt {
		t.Errorf("gemini reports a negative count: %s", data)
	}
}
