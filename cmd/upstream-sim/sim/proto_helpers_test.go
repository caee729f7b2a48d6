package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// postTo sends body to path and reads the whole response; readErr is the
// error reading the body, if any.
func postTo(t *testing.T, ctx context.Context, srv *httptest.Server, path, body string, hdr ...string) (resp *http.Response, data string, readErr error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// event is one Anthropic SSE event.
type event struct {
	Name string // the event: line
	Data map[string]any
	Raw  string // the data: line
}

// anthEvents splits an Anthropic SSE body into its events.
func anthEvents(t *testing.T, body string) []event {
	t.Helper()
	var out []event
	for f := range strings.SplitSeq(body, "\n\n") {
		if f == "" {
			continue
		}
		name, data, ok := strings.Cut(f, "\n")
		if !ok || !strings.HasPrefix(name, "event: ") || !strings.HasPrefix(data, "data: ") || strings.Contains(data, "\n") {
			t.Fatalf("bad frame %q", f)
		}
		e := event{Name: strings.TrimPrefix(name, "event: "), Raw: strings.TrimPrefix(data, "data: ")}
		if err := json.Unmarshal([]byte(e.Raw), &e.Data); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if e.Data["type"] != e.Name {
			t.Fatalf("event %s has type %v", e.Name, e.Data["type"])
		}
		out = append(out, e)
	}
	if !strings.HasSuffix(body, "\n\n") && body != "" {
		t.Fatalf("body does not end a frame: %q", body)
	}
	return out
}

// anthStream is an Anthropic stream split into its parts.
type anthStream struct {
	names    []string // event names in order
	thinking string
	text     string
	nText    int // text_delta events
	start    anthUsage
	delta    *anthUsage // message_delta usage, if any
	stop     string     // message_delta stop_reason
}

// anthUsage is Anthropic's usage object.
type anthUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// usage converts u to the simulator's terms, with the reasoning tokens
// counted from the thinking text.
func (u anthUsage) usage(reasoning int64) sim.Usage {
	return sim.Usage{PromptTokens: u.InputTokens + u.CacheReadInputTokens, CachedTokens: u.CacheReadInputTokens,
		CompletionTokens: u.OutputTokens, ReasoningTokens: reasoning}
}

func parseAnth(t *testing.T, body string) anthStream {
	t.Helper()
	var s anthStream
	for _, e := range anthEvents(t, body) {
		s.names = append(s.names, e.Name)
		var v struct {
			Message struct{ Usage anthUsage } `json:"message"`
			Delta   struct {
				Type, Text, Thinking string
				StopReason           string `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthUsage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e.Raw), &v); err != nil {
			t.Fatal(err)
		}
		switch e.Name {
		case "message_start":
			s.start = v.Message.Usage
		case "content_block_delta":
			switch v.Delta.Type {
			case "text_delta":
				s.text += v.Delta.Text
				s.nText++
			case "thinking_delta":
				s.thinking += v.Delta.Thinking
			}
		case "message_delta":
			s.delta, s.stop = v.Usage, v.Delta.StopReason
		}
	}
	return s
}

// words counts TokenText words in s.
func words(s string) int64 { return int64(strings.Count(s, sim.TokenText)) }

// gemChunk is a decoded Gemini stream chunk.
type gemChunk struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text    string `json:"text"`
				Thought bool   `json:"thought"`
			} `json:"parts"`
			Role string `json:"role"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *gemUsage `json:"usageMetadata"`
	ModelVersion  string    `json:"modelVersion"`
	ResponseID    string    `json:"responseId"`
}

// gemUsage is Gemini's usageMetadata.
type gemUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
}

func (g *gemUsage) usage(t *testing.T) sim.Usage {
	t.Helper()
	if g.TotalTokenCount != g.PromptTokenCount+g.CandidatesTokenCount+g.ThoughtsTokenCount {
		t.Errorf("totalTokenCount %d != %d + %d + %d", g.TotalTokenCount, g.PromptTokenCount, g.CandidatesTokenCount, g.ThoughtsTokenCount)
	}
	return sim.Usage{PromptTokens: g.PromptTokenCount, CachedTokens: g.CachedContentTokenCount,
		CompletionTokens: g.CandidatesTokenCount + g.ThoughtsTokenCount, ReasoningTokens: g.ThoughtsTokenCount}
}

// gemStream is a Gemini stream split into its parts.
type gemStream struct {
	chunks   []gemChunk
	thought  string
	text     string
	nText    int    // chunks with text
	finish   string // the last finishReason seen
	trailing string // what follows the last data: frame (a raw error body)
}

func parseGem(t *testing.T, body string) gemStream {
	t.Helper()
	var s gemStream
	rest := body
	for strings.HasPrefix(rest, "data: ") {
		f, after, ok := strings.Cut(rest, "\r\n\r\n")
		if !ok {
			t.Fatalf("unterminated frame %q", rest)
		}
		rest = after
		var c gemChunk
		if err := json.Unmarshal([]byte(strings.TrimPrefix(f, "data: ")), &c); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" {
			t.Fatalf("frame %q", f)
		}
		for _, p := range c.Candidates[0].Content.Parts {
			if p.Thought {
				s.thought += p.Text
			} else {
				s.text += p.Text
				s.nText++
			}
		}
		if r := c.Candidates[0].FinishReason; r != "" {
			s.finish = r
		}
		s.chunks = append(s.chunks, c)
	}
	s.trailing = rest
	return s
}

// final returns the usage of the last chunk that has one.
func (s gemStream) final(t *testing.T) sim.Usage {
	t.Helper()
	for i := len(s.chunks) - 1; i >= 0; i-- {
		if u := s.chunks[i].UsageMetadata; u != nil {
			return u.usage(t)
		}
	}
	t.Fatal("no usageMetadata")
	return sim.Usage{}
}

// gemPath is the streaming path of model.
func gemPath(model string) string {
	return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
}

// checkSimProTwice waits for two requests on s and checks that both were
// good requests of protocol p and nothing else, with sim-pro's usage of
// the stream tests twice over (each: prompt 15, 7 of it cached; 8
// completion tokens, 4 of them reasoning).
func checkSimProTwice(t *testing.T, s *sim.Server, p sim.Protocol) {
	t.Helper()
	stats := waitStats(t, s, 2)
	if c := stats.ByProtocol.Get(p); c.Requests.OK != 2 || c.Usage() != (sim.Usage{
		PromptTokens: 30, CachedTokens: 14, CompletionTokens: 16, ReasoningTokens: 8}) || stats.Counts != c {
		t.Errorf("stats %+v", stats)
	}
}
