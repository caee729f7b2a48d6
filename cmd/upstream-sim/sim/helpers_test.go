package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// start runs a simulator with a fixed clock behind an httptest server.
func start(t *testing.T) (*sim.Server, *httptest.Server) {
	t.Helper()
	s := sim.New(sim.WithClock(func() time.Time { return time.Unix(1700000042, 0) }))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// post sends a chat completion request and reads the whole response; readErr
// is the error reading the body, if any.
func post(t *testing.T, srv *httptest.Server, body string, hdr ...string) (resp *http.Response, data string, readErr error) {
	t.Helper()
	return postCtx(t, context.Background(), srv, body, hdr...)
}

func postCtx(t *testing.T, ctx context.Context, srv *httptest.Server, body string, hdr ...string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// frames splits an SSE body into its data payloads.
func frames(t *testing.T, body string) []string {
	t.Helper()
	if body == "" {
		return nil
	}
	var out []string
	for _, f := range strings.SplitAfter(body, "\n\n") {
		if f == "" {
			continue
		}
		if !strings.HasPrefix(f, "data: ") || !strings.HasSuffix(f, "\n\n") {
			t.Fatalf("bad frame %q", f)
		}
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(f, "data: "), "\n\n"))
	}
	return out
}

// chunk is a decoded chunk; Raw keeps its keys to tell null from absent.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Raw   map[string]json.RawMessage
}

// wireUsage is OpenAI's usage object.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
		AudioTokens  int64 `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (w *wireUsage) usage(t *testing.T) sim.Usage {
	t.Helper()
	if w.TotalTokens != w.PromptTokens+w.CompletionTokens {
		t.Errorf("total_tokens %d != %d + %d", w.TotalTokens, w.PromptTokens, w.CompletionTokens)
	}
	return sim.Usage{PromptTokens: w.PromptTokens, CachedTokens: w.PromptTokensDetails.CachedTokens,
		CompletionTokens: w.CompletionTokens, ReasoningTokens: w.CompletionTokensDetails.ReasoningTokens}
}

func decode(t *testing.T, payload string) chunk {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(payload), &c); err != nil {
		t.Fatalf("decode %q: %v", payload, err)
	}
	if err := json.Unmarshal([]byte(payload), &c.Raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// parsed is a streamed response split into its parts.
type parsed struct {
	chunks   []chunk // every chunk, [DONE] excluded
	content  string  // concatenated content deltas
	nContent int     // chunks with non-empty content
	finish   string
	done     bool
}

func parseStream(t *testing.T, body string) parsed {
	t.Helper()
	var p parsed
	for i, f := range frames(t, body) {
		if f == "[DONE]" {
			if p.done {
				t.Fatal("two [DONE]")
			}
			p.done = true
			continue
		}
		if p.done {
			t.Fatalf("frame %d after [DONE]: %s", i, f)
		}
		c := decode(t, f)
		p.chunks = append(p.chunks, c)
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				p.content += *ch.Delta.Content
				p.nContent++
			}
			if ch.FinishReason != nil {
				p.finish = *ch.FinishReason
			}
		}
	}
	return p
}

// waitStats polls until the server has ended total requests.
func waitStats(t *testing.T, s *sim.Server, total int64) sim.Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Stats()
		if st.Requests.Total >= total && st.Requests.InFlight == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never reached %d requests: %+v", total, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func chatBody(model string, stream, includeUsage bool, extra string) string {
	b := `{"model":"` + model + `","messages":[{"role":"user","content":"say hi"}]`
	if stream {
		b += `,"stream":true`
	}
	if includeUsage {
		b += `,"stream_options":{"include_usage":true}`
	}
	return b + extra + "}"
}
