package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestEstimatedPromptCountsEveryFieldTheModelReads: with no usage from
// the upstream, the prompt is estimated from the request; text a client
// put in the Responses API's instructions, tools or text format, or in a
// chat message's name, an assistant refusal, response_format or
// prediction, counted nothing (an attacker review: 1,000 words there, an
// estimate of 1 to 17 tokens).
func TestEstimatedPromptCountsEveryFieldTheModelReads(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/responses") {
			_, _ = io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n")
			return
		}
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ok"}}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"})
	})
	words := strings.TrimSpace(strings.Repeat("ledger ", 1000)) // about 1,000 tokens
	const chat = `{"model":"om","stream":true,`
	for _, c := range []struct{ name, path, body string }{
		{"responses instructions", "/v1/responses", `{"model":"om","stream":true,"input":"hi","instructions":"` + words + `"}`},
		{"responses tools", "/v1/responses", `{"model":"om","stream":true,"input":"hi","tools":[{"type":"function","name":"f","description":"` + words + `","parameters":{}}]}`},
		{"responses text format", "/v1/responses", `{"model":"om","stream":true,"input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"description":"` + words + `"}}}}`},
		{"responses function output", "/v1/responses", `{"model":"om","stream":true,"input":[{"type":"function_call_output","call_id":"c","output":"` + words + `"}]}`},
		{"chat message name", "/v1/chat/completions", chat + `"messages":[{"role":"user","name":"` + words + `","content":"hi"}]}`},
		{"chat refusal", "/v1/chat/completions", chat + `"messages":[{"role":"assistant","refusal":"` + words + `"},{"role":"user","content":"hi"}]}`},
		{"chat response_format", "/v1/chat/completions", chat + `"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"description":"` + words + `"}}}}`},
		{"chat prediction", "/v1/chat/completions", chat + `"messages":[{"role":"user","content":"hi"}],"prediction":{"type":"content","content":"` + words + `"}}`},
	} {
		resp := st.post(t, c.path, c.body)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Usage.PromptTokens < 1000 {
			t.Errorf("%s: estimated prompt %d tokens (source %s), want at least the 1,000 words' tokens", c.name, e.Usage.PromptTokens, e.UsageSource)
		}
	}
}
