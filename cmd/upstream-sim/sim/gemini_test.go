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

// gemBody is a generateContent request; its prompt is 3 + 4 + 2 = 9 tokens.
// maxTokens 0 leaves maxOutputTokens unset.
func gemBody(maxTokens int, thoughts bool, extra string) string {
	b := `{"contents":[{"role":"user","parts":[{"text":"say hi"}]}]`
	var cfg []string
	if maxTokens > 0 {
		cfg = append(cfg, `"maxOutputTokens":`+strconv.Itoa(maxTokens))
	}
	if thoughts {
		cfg = append(cfg, `"thinkingConfig":{"includeThoughts":true}`)
	}
	if cfg != nil {
		b += `,"generationConfig":{` + strings.Join(cfg, ",") + "}"
	}
	return b + extra + "}"
}

func TestGeminiStream(t *testing.T) {
	s, srv := start(t)
	body := gemBody(8, true, `,"systemInstruction":{"parts":[{"text":"be brief"}]}`)
	resp, data, err := postTo(t, context.Background(), srv, gemPath("sim-pro"), body, "X-Sim-Chunks", "2")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, err %v", resp.StatusCode, err)
	}
	st := parseGem(t, data)
	if len(st.chunks) != 3 || st.trailing != "" || strings.Contains(data, "[DONE]") {
		t.Fatalf("%d chunks, trailing %q", len(st.chunks), st.trailing)
	}
	// prompt 3 + (4+2) + (4+2) = 15, cached 7; 8 tokens: 4 thoughts, 4 text in 2 chunks.
	var got []string
	for _, c := range st.chunks {
		u := c.UsageMetadata
		got = append(got, strconv.FormatInt(u.CandidatesTokenCount, 10)+"/"+c.Candidates[0].FinishReason)
		if u.PromptTokenCount != 15 || u.CachedContentTokenCount != 7 || u.ThoughtsTokenCount != 4 ||
			c.ModelVersion != "sim-pro" || c.ResponseID != sim.ResponseID(sim.Gemini, []byte(body)) {
			t.Errorf("chunk %+v usage %+v", c, u)
		}
		u.usage(t)
	}
	if strings.Join(got, " ") != "0/ 2/ 4/MAX_TOKENS" {
		t.Errorf("candidates/finish per chunk %q", got)
	}
	if st.thought != strings.Repeat("tok ", 4) || st.text != strings.Repeat("tok ", 4) || st.nText != 2 {
		t.Errorf("thought %q text %q in %d", st.thought, st.text, st.nText)
	}
	expected, err := sim.ExpectedGeminiUsage("sim-pro", []byte(body))
	if final := st.final(t); err != nil || final != expected {
		t.Errorf("final %+v, expected %+v (%v)", final, expected, err)
	}

	// Non-streamed, under /gemini: one pretty-printed response, same figures.
	resp, data, _ = postTo(t, context.Background(), srv, "/gemini/v1beta/models/sim-pro:generateContent", body)
	var c gemChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(data, "{\n  \"candidates\"") {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	parts := c.Candidates[0].Content.Parts
	if len(parts) != 2 || !parts[0].Thought || parts[0].Text != st.thought || parts[1].Text != st.text ||
		c.Candidates[0].FinishReason != "MAX_TOKENS" || c.UsageMetadata.usage(t) != expected {
		t.Errorf("response %s", data)
	}
	checkSimProTwice(t, s, sim.Gemini)
}

func TestGeminiProfiles(t *testing.T) {
	_, srv := start(t)
	for _, tc := range []struct {
		model             string
		maxTokens         int
		thoughts          bool
		finish            string
		completion        int64
		cached, reasoning int64
	}{
		{"sim-small", 0, false, "STOP", 16, 0, 0},
		{"sim-small", 5, true, "MAX_TOKENS", 5, 0, 0},
		{"sim-cache", 0, false, "STOP", 16, 4, 0},
		{"gemini-reasoning", 10, false, "MAX_TOKENS", 10, 0, 5},
		{"models/sim-pro", 0, true, "STOP", 16, 4, 8},
	} {
		body := gemBody(tc.maxTokens, tc.thoughts, "")
		_, data, _ := postTo(t, context.Background(), srv, gemPath(strings.TrimPrefix(tc.model, "models/")), body)
		st := parseGem(t, data)
		want := sim.Usage{PromptTokens: 9, CachedTokens: tc.cached, CompletionTokens: tc.completion, ReasoningTokens: tc.reasoning}
		expected, _ := sim.ExpectedGeminiUsage(tc.model, []byte(body))
		wantThought := ""
		if tc.thoughts {
			wantThought = strings.Repeat("tok ", int(tc.reasoning))
		}
		if st.final(t) != want || expected != want || st.finish != tc.finish || st.thought != wantThought ||
			words(st.text) != tc.completion-tc.reasoning || int64(st.nText) != tc.completion-tc.reasoning {
			t.Errorf("%s/%d: final %+v thought %q finish %q, want %+v %s", tc.model, tc.maxTokens, st.final(t), st.thought, st.finish, want, tc.finish)
		}
	}
}

func TestGeminiPromptRule(t *testing.T) {
	const contents = `"contents":[{"role":"user","parts":[{"text":"say hi"}]}]`
	for _, tc := range []struct {
		fields string
		want   int64
	}{
		{contents, 9},
		{`"systemInstruction":{"parts":[{"text":"a b"},{"text":"c"}]},` + contents, 9 + 4 + 3},
		{`"systemInstruction":{"parts":[]},` + contents, 9 + 4},
		{`"contents":[{"role":"user","parts":[{"text":"a"},{"inlineData":{"data":"x y"}}]},` +
			`{"role":"model","parts":[{"text":"x y z","thought":true},{"text":"b c"}]}]`, 3 + 5 + 6},
	} {
		u, err := sim.ExpectedGeminiUsage("m", []byte(`{`+tc.fields+`}`))
		if err != nil || u.PromptTokens != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.fields, u.PromptTokens, err, tc.want)
		}
	}
}

func TestGeminiErrors(t *testing.T) {
	s, srv := start(t)
	check := func(name string, resp *http.Response, data string, status int, rpc string) {
		t.Helper()
		var e struct {
			Error *struct {
				Code    int
				Message string
				Status  string
			}
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil || resp.StatusCode != status || e.Error == nil ||
			e.Error.Code != status || e.Error.Status != rpc || e.Error.Message == "" {
			t.Errorf("%s: status %d body %s, want %d %s", name, resp.StatusCode, data, status, rpc)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{gemPath("m"), `{"contents":[]}`},
		{gemPath("m"), `{"contents":`},
		{gemPath("m"), gemBody(0, false, `,"generationConfig":{"maxOutputTokens":0}`)},
		{gemPath("m"), gemBody(0, false, `,"labels":{"sim_fault":"explode"}`)},
		{"/v1beta/models/m:streamGenerateContent", gemBody(0, false, "")}, // no alt=sse
		{"/v1beta/models/:generateContent", gemBody(0, false, "")},
	} {
		resp, data, _ := postTo(t, context.Background(), srv, tc.path, tc.body)
		check(tc.path+" "+tc.body, resp, data, 400, "INVALID_ARGUMENT")
	}
	resp, data, _ := postTo(t, context.Background(), srv, "/v1beta/models/m:predict", "{}")
	check("unknown method", resp, data, 404, "NOT_FOUND")
	for _, tc := range []struct {
		status int
		rpc    string
	}{{429, "RESOURCE_EXHAUSTED"}, {503, "UNAVAILABLE"}, {500, "INTERNAL"}, {403, "PERMISSION_DENIED"}} {
		resp, data, _ := postTo(t, context.Background(), srv, gemPath("sim-pro"), gemBody(0, false, ""), "X-Sim-Status", strconv.Itoa(tc.status))
		check(strconv.Itoa(tc.status), resp, data, tc.status, tc.rpc)
		if retry := resp.Header.Get("Retry-After"); (retry == "1") != (tc.status == 429 || tc.status == 503) {
			t.Errorf("%d: Retry-After %q", tc.status, retry)
		}
	}
	st := s.Stats()
	if g := st.ByProtocol.Gemini.Requests; g.BadRequest != 6 || g.Status != 4 || g.Total != 10 || st.Usage() != (sim.Usage{}) {
		t.Errorf("stats %+v", st)
	}
}
