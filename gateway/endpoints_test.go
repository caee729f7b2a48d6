package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

func readAll(t *testing.T, st *stack, path, body string, header ...string) (int, string, string) {
	t.Helper()
	resp := st.post(t, path, body, header...)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), resp.Header.Get("X-Request-Id")
}

func TestEmbeddings(t *testing.T) {
	st := newStack(t, nil)
	// OpenAI-compatible: passed through, the provider's count metered.
	status, body, id := readAll(t, st, "/v1/embeddings", `{"model":"sim-small","input":["one two three","four"]}`)
	if status != 200 || !strings.Contains(body, `"prompt_tokens":4`) || strings.Count(body, `"object":"embedding"`) != 2 {
		t.Fatalf("%d %s", status, body)
	}
	e := st.sink.event(t, id)
	if e.Endpoint != "/v1/embeddings" || e.Usage.PromptTokens != 4 || e.Usage.CompletionTokens != 0 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %+v", e)
	}
	// Gemini: translated to batchEmbedContents and back; no usage reported, so estimated.
	status, body, id = readAll(t, st, "/v1/embeddings", `{"model":"gemini-sim","input":["one two three","four"],"dimensions":3}`)
	var out struct {
		Object string `json:"object"`
		Data   []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || status != 200 || out.Object != "list" || len(out.Data) != 2 ||
		len(out.Data[1].Embedding) != 3 || out.Data[1].Index != 1 {
		t.Fatalf("%d %s (%v)", status, body, err)
	}
	e = st.sink.event(t, id)
	if e.UsageSource != usage.SourceEstimated || e.Usage.PromptTokens == 0 || e.Usage.PromptTokens != out.Usage.PromptTokens || e.Provider != "sim-gemini" {
		t.Fatalf("event %+v, response usage %d", e, out.Usage.PromptTokens)
	}
	// Gemini, one string: embedContent.
	if status, body, _ = readAll(t, st, "/v1/embeddings", `{"model":"gemini-sim","input":"hello"}`); status != 200 || strings.Count(body, `"embedding"`) != 2 {
		t.Fatalf("%d %s", status, body) // "object":"embedding" and "embedding":[...]
	}
	// Anthropic has no embeddings: 404, no event.
	n := st.sink.count()
	if status, body, _ = readAll(t, st, "/v1/embeddings", `{"model":"claude-sim","input":"x"}`); status != 404 || !strings.Contains(body, "model_not_found") {
		t.Fatalf("%d %s", status, body)
	}
	if status, body, _ = readAll(t, st, "/v1/embeddings", `{"model":"sim-small"}`); status != 400 || !strings.Contains(body, "input") {
		t.Fatalf("%d %s", status, body)
	}
	// A native route's model served by another provider type: 404 in
	// that protocol's envelope, naming the model and the type (it read
	// "model sim-small is not served by a anthropic provider here").
	status, body, _ = readAll(t, st, "/anthropic/v1/messages", `{"model":"sim-small","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if want := `the model \"sim-small\" is not served by a provider of type anthropic here`; status != 404 || !strings.Contains(body, want) {
		t.Fatalf("%d %s; want 404 with %s", status, body, want)
	}
	time.Sleep(20 * time.Millisecond)
	if st.sink.count() != n {
		t.Fatal("a refused request was metered")
	}
}

func TestLegacyCompletions(t *testing.T) {
	st := newStack(t, nil)
	const req = `{"model":"sim-small","prompt":"say it twice","max_tokens":5`
	want, _ := sim.CompletionUsage([]byte(req + "}"))
	status, body, id := readAll(t, st, "/v1/completions", req+"}")
	if status != 200 || !strings.Contains(body, `"object":"text_completion"`) {
		t.Fatalf("%d %s", status, body)
	}
	if e := st.sink.event(t, id); e.Usage.PromptTokens != want.PromptTokens || e.Usage.CompletionTokens != want.CompletionTokens ||
		e.Endpoint != "/v1/completions" || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %+v, want %+v", e, want)
	}
	// Streamed without include_usage: usage metered, no usage chunk shown.
	status, body, id = readAll(t, st, "/v1/completions", req+`,"stream":true}`)
	if status != 200 || strings.Count(body, TokenChunk) != 5 || strings.Contains(body, `"usage"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("%d %s", status, body)
	}
	if e := st.sink.event(t, id); e.Usage.PromptTokens != want.PromptTokens || e.Usage.CompletionTokens != want.CompletionTokens || !e.Stream {
		t.Fatalf("streamed event %+v, want %+v", e, want)
	}
	// With include_usage: the usage chunk, then [DONE].
	status, body, _ = readAll(t, st, "/v1/completions", req+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if status != 200 || !strings.Contains(body, `"choices":[],"usage":{"prompt_tokens":`) {
		t.Fatalf("%d %s", status, body)
	}
	// Only OpenAI-compatible providers serve it.
	if status, body, _ = readAll(t, st, "/v1/completions", `{"model":"claude-sim","prompt":"x"}`); status != 404 {
		t.Fatalf("%d %s", status, body)
	}
}

// TokenChunk is how a legacy completions chunk carries one token.
const TokenChunk = `"text":"tok "`

func TestCountTokensUnmetered(t *testing.T) {
	st := newStack(t, nil)
	status, body, id := readAll(t, st, "/anthropic/v1/messages/count_tokens",
		`{"model":"claude-sim","messages":[{"role":"user","content":"one two"}]}`, "X-Api-Key", testKey)
	if status != 200 || !strings.Contains(body, `"input_tokens":`) || id == "" {
		t.Fatalf("%d %s", status, body)
	}
	status, body, _ = readAll(t, st, "/gemini/v1beta/models/gemini-sim:countTokens",
		`{"contents":[{"parts":[{"text":"one two"}]}]}`, "X-Goog-Api-Key", testKey)
	if status != 200 || !strings.Contains(body, `"totalTokens":`) {
		t.Fatalf("%d %s", status, body)
	}
	if status, body, _ = readAll(t, st, "/anthropic/v1/messages/count_tokens", `{"model":"claude-sim","messages":[]}`, "X-Nothing", "1"); status != 401 ||
		!strings.Contains(body, `"type":"error"`) {
		t.Fatalf("no key: %d %s", status, body)
	}
	time.Sleep(20 * time.Millisecond)
	if n := st.sink.count(); n != 0 {
		t.Fatalf("%d events for token counting", n)
	}
	if s := st.simStats(t); s.Requests.Total != 0 {
		t.Fatalf("the simulator counted %+v", s.Requests)
	}
}

// TestCountTokensHoldsTheKeysChecks: token counting is not metered, but
// it calls the upstream on the operator's credentials, so it goes through
// the key's checks as the provider's other routes do: Anthropic's
// count_tokens (a route of its own) was behind authentication only, and a
// blocked key or one over its rpm_limit was served; Gemini's :countTokens
// (under the model's route) was not.
func TestCountTokensHoldsTheKeysChecks(t *testing.T) {
	st := newKeyStack(t, map[string]usage.KeyState{
		"tg-blocked":        {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000c6", Blocked: "the monthly spend limit is reached"},
		"tg-rpm1-anthropic": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000c7", RPMLimit: 1},
		"tg-rpm1-gemini":    {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000c8", RPMLimit: 1},
		"tg-other-model":    {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000c9", AllowedModels: []string{"sim-small"}},
	})
	for _, tc := range []struct{ name, path, body, header string }{
		{"anthropic", "/anthropic/v1/messages/count_tokens", `{"model":"claude-sim","messages":[{"role":"user","content":"hello"}]}`, "X-Api-Key"},
		{"gemini", "/gemini/v1beta/models/gemini-sim:countTokens", `{"contents":[{"parts":[{"text":"hello"}]}]}`, "X-Goog-Api-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := answer(t, st.post(t, tc.path, tc.body, tc.header, "tg-blocked")); status != http.StatusPaymentRequired {
				t.Errorf("a blocked key: %d %s, want 402", status, body)
			}
			// A model served here but not in the key's allowed_models: 403, as
			// on the provider's other routes; it was 404 "not served" (a review).
			if status, body := answer(t, st.post(t, tc.path, tc.body, tc.header, "tg-other-model")); status != http.StatusForbidden ||
				!strings.Contains(body, "allowed_models") {
				t.Errorf("a model outside allowed_models: %d %s, want 403 naming allowed_models", status, body)
			}
			var statuses []int
			for range 2 {
				status, _ := answer(t, st.post(t, tc.path, tc.body, tc.header, "tg-rpm1-"+tc.name))
				statuses = append(statuses, status)
			}
			if !slices.Equal(statuses, []int{http.StatusOK, http.StatusTooManyRequests}) {
				t.Errorf("rpm_limit 1, two calls in the minute: %v, want [200 429]", statuses)
			}
		})
	}
}

// TestResponsesFailover: the Responses API, a native route, fails over
// between its model's deployments too, and is metered by upstream-sim's
// rules.
func TestResponsesFailover(t *testing.T) {
	st := failoverStack(t, nil)
	st.setFaults(t, "east", `{"fail_next":1,"status":500}`)
	st.setFaults(t, "west", `{"fail_next":1,"status":429}`)
	body := `{"model":"smart","input":"one two three","max_output_tokens":6,"stream":true}`
	want, err := sim.ResponsesUsage([]byte(strings.Replace(body, "smart", "sim-small", 1)))
	if err != nil {
		t.Fatal(err)
	}
	status, out, id := readAll(t, st, "/v1/responses", body)
	if status != 200 || !strings.Contains(out, "event: response.incomplete") {
		t.Fatalf("%d %s", status, out)
	}
	e := st.sink.event(t, id)
	if e.Deployment != "spare" || e.Attempt != 3 || e.Usage.PromptTokens != want.PromptTokens || e.Usage.CompletionTokens != want.CompletionTokens {
		t.Fatalf("event %+v, want usage %+v", e, want)
	}
	if n := len(st.sink.eventsOf(id)); n != 3 {
		t.Fatalf("%d attempts", n)
	}
}
