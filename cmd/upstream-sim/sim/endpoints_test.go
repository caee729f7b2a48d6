package sim_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

func postJSON(t *testing.T, url, body string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestDeploymentFaultKnobs(t *testing.T) {
	s := sim.New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	if status, _, body := postJSON(t, srv.URL+"/d/east/faults", `{"fail_next":2,"status":503,"retry_after":"9"}`); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if status, _, body := postJSON(t, srv.URL+"/d/east/faults", `{"status":404}`); status != 400 {
		t.Fatalf("a 404 knob: %d %s", status, body)
	}
	chat := `{"model":"m","messages":[{"role":"user","content":"a b"}]}`
	for i, want := range []int{503, 503, 200} {
		status, h, body := postJSON(t, srv.URL+"/d/east/v1/chat/completions", chat)
		if status != want || (want == 503 && h.Get("Retry-After") != "9") {
			t.Fatalf("request %d: %d %v %s", i, status, h, body)
		}
	}
	if status, _, _ := postJSON(t, srv.URL+"/d/west/v1/chat/completions", chat); status != 200 {
		t.Fatalf("west: %d", status)
	}
	// Dying before any frame, then after two content chunks.
	if err := s.SetFaults("west", sim.Faults{DieNext: 2}); err != nil {
		t.Fatal(err)
	}
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"a b"}]}`
	for range 2 {
		resp, err := http.Post(srv.URL+"/d/west/v1/chat/completions", "application/json", strings.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a dying stream ended cleanly")
		}
	}
	st := s.Stats()
	east, west := st.ByDeployment["east"], st.ByDeployment["west"]
	if east.Requests.Status != 2 || east.Requests.OK != 1 || west.Requests.OK != 1 || west.Requests.Disconnected != 2 {
		t.Fatalf("by deployment %+v", st.ByDeployment)
	}
	if st.Requests.Total != east.Requests.Total+west.Requests.Total {
		t.Fatalf("protocol total %d, deployments %d+%d", st.Requests.Total, east.Requests.Total, west.Requests.Total)
	}
	if s.ResetStats(); s.Stats().ByDeployment["east"].Requests.Total != 0 {
		t.Fatal("reset left deployment counts")
	}
}

func TestEmbeddingsAndCompletions(t *testing.T) {
	s := sim.New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	status, _, body := postJSON(t, srv.URL+"/v1/embeddings", `{"model":"e","input":["one two","three"],"dimensions":4}`)
	var emb struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &emb); err != nil || status != 200 || len(emb.Data) != 2 || len(emb.Data[0].Embedding) != 4 || emb.Usage.PromptTokens != 3 {
		t.Fatalf("%d %s", status, body)
	}
	status, _, body = postJSON(t, srv.URL+"/v1beta/models/e:batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"a b"}]}},{"content":{"parts":[{"text":"c"}]}}]}`)
	if status != 200 || strings.Count(body, `"values"`) != 2 {
		t.Fatalf("%d %s", status, body)
	}
	status, _, body = postJSON(t, srv.URL+"/v1/completions", `{"model":"m","prompt":"a b c","max_tokens":3}`)
	if status != 200 || !strings.Contains(body, `"text":"tok tok tok "`) || !strings.Contains(body, `"prompt_tokens":6,"completion_tokens":3`) {
		t.Fatalf("%d %s", status, body)
	}
	resp, err := http.Post(srv.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"a","max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	resp.Body.Close()
	if len(lines) != 4 || !strings.Contains(lines[2], `"choices":[],"usage":{"prompt_tokens":4`) || lines[3] != "data: [DONE]" {
		t.Fatalf("stream:\n%s", strings.Join(lines, "\n"))
	}
	st := s.Stats().ByProtocol
	if st.OpenAI.Requests.OK != 3 || st.OpenAI.PromptTokens != 3+6+4 || st.Gemini.PromptTokens != 3 {
		t.Fatalf("stats %+v", st)
	}
	// Counting is free: not in the stats.
	if status, _, body = postJSON(t, srv.URL+"/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"a b"}]}`); status != 200 ||
		!strings.Contains(body, `"input_tokens":`) {
		t.Fatalf("%d %s", status, body)
	}
	if n := s.Stats().ByProtocol.Anthropic.Requests.Total; n != 0 {
		t.Fatalf("count_tokens counted: %d", n)
	}
}

func TestResponsesAndToolCalls(t *testing.T) {
	s := sim.New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := `{"model":"sim-pro","input":"a b c","max_output_tokens":8}`
	want, err := sim.ResponsesUsage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	status, _, out := postJSON(t, srv.URL+"/v1/responses", body)
	if status != 200 || !strings.Contains(out, `"status":"incomplete"`) || !strings.Contains(out, `"output_tokens":8`) || want.ReasoningTokens != 4 {
		t.Fatalf("%d %s (%+v)", status, out, want)
	}
	status, _, out = postJSON(t, srv.URL+"/v1/responses", `{"model":"m","input":[{"role":"user","content":"x y"}],"stream":true}`)
	if status != 200 || strings.Count(out, "event: response.output_text.delta") != sim.DefaultCompletionTokens ||
		!strings.Contains(out, `event: response.completed`) || !strings.Contains(out, `"input_tokens":9`) {
		t.Fatalf("%d %s", status, out)
	}
	// A tool call, whole and streamed: arguments are JSON holding the content.
	chat := `{"model":"m","max_tokens":3,"tools":[{"type":"function","function":{"name":"lookup"}}],"metadata":{"sim_tool_call":"1"},` +
		`"messages":[{"role":"user","content":"x"}]`
	status, _, out = postJSON(t, srv.URL+"/v1/chat/completions", chat+"}")
	var cc struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(out), &cc); err != nil || status != 200 || cc.Choices[0].FinishReason != "tool_calls" ||
		cc.Choices[0].Message.ToolCalls[0].Function.Name != "lookup" || cc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"text":"tok tok tok "}` {
		t.Fatalf("%d %s", status, out)
	}
	status, _, out = postJSON(t, srv.URL+"/v1/chat/completions", chat+`,"stream":true}`)
	var args string
	for _, l := range strings.Split(out, "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
		}
	}
	if status != 200 || args != `{"text":"tok tok tok "}` || !strings.Contains(out, `"finish_reason":"tool_calls"`) {
		t.Fatalf("%d args %q\n%s", status, args, out)
	}
}
