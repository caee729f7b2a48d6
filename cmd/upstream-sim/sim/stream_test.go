package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

func TestStreamWithoutIncludeUsage(t *testing.T) {
	_, srv := start(t)
	body := chatBody("sim-small", true, false, "")
	resp, data, err := post(t, srv, body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, err %v", resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	p := parseStream(t, data)
	if !p.done || p.finish != "stop" || p.content != strings.Repeat("tok ", 16) || p.nContent != 16 {
		t.Fatalf("done %v finish %q content %q in %d chunks", p.done, p.finish, p.content, p.nContent)
	}
	if len(p.chunks) != 18 { // role, 16 content, finish
		t.Fatalf("%d chunks", len(p.chunks))
	}
	first := p.chunks[0].Choices[0].Delta
	if first.Role == nil || *first.Role != "assistant" || first.Content == nil || *first.Content != "" {
		t.Errorf("first delta %+v", first)
	}
	for i, c := range p.chunks {
		if _, ok := c.Raw["usage"]; ok {
			t.Errorf("chunk %d has a usage key", i)
		}
		if c.ID != sim.CompletionID([]byte(body)) || c.Object != "chat.completion.chunk" ||
			c.Model != "sim-small" || c.Created != 1700000042 || len(c.Choices) != 1 {
			t.Errorf("chunk %d: %+v", i, c)
		}
	}
	if d := p.chunks[17].Raw["choices"]; !strings.Contains(string(d), `"delta":{}`) {
		t.Errorf("finish chunk choices %s", d)
	}
}

func TestStreamIncludeUsage(t *testing.T) {
	_, srv := start(t)
	body := chatBody("sim-small", true, true, `,"max_tokens":5`)
	_, data, _ := post(t, srv, body)
	p := parseStream(t, data)
	n := len(p.chunks)
	if !p.done || p.finish != "length" || n != 8 { // role, 5 content, finish, usage
		t.Fatalf("done %v finish %q chunks %d", p.done, p.finish, n)
	}
	for i, c := range p.chunks[:n-1] {
		if u, ok := c.Raw["usage"]; !ok || string(u) != "null" {
			t.Errorf("chunk %d usage %s (present %v), want null", i, u, ok)
		}
	}
	last := p.chunks[n-1]
	if string(last.Raw["choices"]) != "[]" || last.Usage == nil {
		t.Fatalf("last chunk %+v", last)
	}
	want := sim.Usage{PromptTokens: 9, CompletionTokens: 5}
	if got := last.Usage.usage(t); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

func TestNonStreamMatchesStream(t *testing.T) {
	_, srv := start(t)
	for _, model := range sim.ModelNames() {
		for _, extra := range []string{"", `,"max_tokens":7`, `,"max_completion_tokens":3,"max_tokens":99`} {
			resp, data, _ := post(t, srv, chatBody(model, false, false, extra))
			var c struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				Choices []struct {
					Message      struct{ Role, Content string } `json:"message"`
					FinishReason string                         `json:"finish_reason"`
				} `json:"choices"`
				Usage *wireUsage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil || resp.StatusCode != 200 || c.Usage == nil {
				t.Fatalf("%s%s: status %d err %v: %s", model, extra, resp.StatusCode, err, data)
			}
			body := chatBody(model, true, true, extra)
			_, sdata, _ := post(t, srv, body)
			p := parseStream(t, sdata)
			su := p.chunks[len(p.chunks)-1].Usage.usage(t)
			want, err := sim.ExpectedUsage([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Usage.usage(t); got != su || got != want {
				t.Errorf("%s%s: non-stream %+v, stream %+v, expected %+v", model, extra, got, su, want)
			}
			if c.Object != "chat.completion" || c.Choices[0].Message.Content != p.content ||
				c.Choices[0].FinishReason != p.finish || c.Choices[0].Message.Role != "assistant" {
				t.Errorf("%s%s: completion %+v vs stream content %q finish %q", model, extra, c, p.content, p.finish)
			}
		}
	}
}

func TestProfiles(t *testing.T) {
	_, srv := start(t)
	// prompt: 3 + (4 + 2) + (4 + 4) = 17; completion 10.
	msgs := `,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"one two three four"}]`
	for _, tc := range []struct {
		model             string
		cached, reasoning int64
	}{
		{"sim-small", 0, 0}, {"sim-cache", 8, 0}, {"sim-reasoning", 0, 5}, {"sim-pro", 8, 5},
		{"gpt-4o", 0, 0}, {"my-CACHE-model", 8, 0}, {"o3-reasoner", 0, 5},
	} {
		body := `{"model":"` + tc.model + `","stream":true,"stream_options":{"include_usage":true},"max_tokens":10` + msgs + `}`
		_, data, _ := post(t, srv, body)
		p := parseStream(t, data)
		got := p.chunks[len(p.chunks)-1].Usage.usage(t)
		want := sim.Usage{PromptTokens: 17, CachedTokens: tc.cached, CompletionTokens: 10, ReasoningTokens: tc.reasoning}
		if got != want {
			t.Errorf("%s: usage %+v, want %+v", tc.model, got, want)
		}
		if words := int64(strings.Count(p.content, "tok ")); words != 10-tc.reasoning || int64(p.nContent) != words {
			t.Errorf("%s: %d content words in %d chunks, want %d", tc.model, words, p.nContent, 10-tc.reasoning)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	for _, tc := range []struct {
		msgs string
		want int64
	}{
		{`[{"role":"user","content":"hi"}]`, 8},
		{`[{"role":"user","content":"  a\tb\nc  d "}]`, 11},
		{`[{"role":"user","content":""}]`, 7},
		{`[{"role":"assistant","content":null,"tool_calls":[{"id":"x"}]}]`, 7},
		{`[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"image_url","image_url":{"url":"x y"}},{"type":"text","text":"c"}]}]`, 10},
		{`[{"role":"system","content":"x"},{"role":"user","content":"y z"}]`, 3 + 5 + 6},
	} {
		got, err := sim.PromptTokens([]byte(`{"model":"m","messages":` + tc.msgs + `}`))
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.msgs, got, err, tc.want)
		}
	}
}

func TestChunkControl(t *testing.T) {
	_, srv := start(t)
	for _, tc := range []struct {
		extra  string
		hdr    []string
		chunks []string
	}{
		{`,"max_tokens":10,"metadata":{"sim_chunks":"3"}`, nil, []string{"tok tok tok tok ", "tok tok tok ", "tok tok tok "}},
		{`,"max_tokens":4,"metadata":{"sim_chunks":"3"}`, []string{"X-Sim-Chunks", "1"}, []string{"tok tok tok tok "}},
		{`,"max_tokens":2`, []string{"X-Sim-Chunks", "50"}, []string{"tok ", "tok "}},
	} {
		_, data, _ := post(t, srv, chatBody("sim-small", true, false, tc.extra), tc.hdr...)
		p := parseStream(t, data)
		var got []string
		for _, c := range p.chunks[1 : len(p.chunks)-1] {
			got = append(got, *c.Choices[0].Delta.Content)
		}
		if strings.Join(got, "|") != strings.Join(tc.chunks, "|") {
			t.Errorf("%s %v: chunks %q, want %q", tc.extra, tc.hdr, got, tc.chunks)
		}
	}
}

func TestDelayControl(t *testing.T) {
	_, srv := start(t)
	t0 := time.Now()
	_, data, _ := post(t, srv, chatBody("sim-small", true, false, `,"max_tokens":3`), "X-Sim-Delay-Ms", "20")
	if d := time.Since(t0); d < 80*time.Millisecond { // 3 content chunks and the finish chunk
		t.Errorf("took %v", d)
	}
	if p := parseStream(t, data); !p.done || p.nContent != 3 {
		t.Errorf("stream %+v", p)
	}
}

func TestModels(t *testing.T) {
	_, srv := start(t)
	resp, err := srv.Client().Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string                                 `json:"object"`
		Data   []struct{ ID, Object, OwnedBy string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatal(resp.StatusCode, err)
	}
	if list.Object != "list" || len(list.Data) != 4 || list.Data[3].ID != "sim-pro" || list.Data[0].Object != "model" {
		t.Errorf("list %+v", list)
	}
}
