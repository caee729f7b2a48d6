package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStreamFailedAfterItBeganBillsThePrompt: an OpenAI stream that sends
// its first chunk (the role, no content) and then breaks or stalls has
// been accepted and begun: the provider bills its prompt, and so does the
// event (estimated), where it used to record nothing (a limits review:
// a reasoning model's role chunk comes at once, then its reasoning runs,
// and a break or stall there was billed to no one). A stream whose first
// event is an error, or that fails before any event, still bills nothing.
func TestStreamFailedAfterItBeganBillsThePrompt(t *testing.T) {
	const role = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch {
		case strings.Contains(r.URL.Path, "/error/"):
			_, _ = io.WriteString(w, `data: {"error":{"message":"overloaded","type":"server_error"}}`+"\n\n")
			return
		case strings.Contains(r.URL.Path, "/nothing/"):
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, role)
		w.(http.Flusher).Flush()
		if strings.Contains(r.URL.Path, "/stall/") {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		panic(http.ErrAbortHandler) // the connection closes mid-body
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		for _, name := range []string{"break", "stall", "error", "nothing"} {
			c.Providers = append(c.Providers, gateway.ProviderConfig{Name: name, Type: "openai", BaseURL: up.URL + "/" + name + "/v1",
				APIKey: "sk-up-123456789", StallTimeout: 200 * time.Millisecond})
			c.Models = append(c.Models, gateway.ModelConfig{Name: name, Provider: name})
		}
	})
	prompt := strings.Repeat("count these words please ", 40)
	for _, tc := range []struct {
		model  string
		status usage.Status
		billed bool
	}{
		{"break", usage.StatusUpstreamError, true},
		{"stall", usage.StatusTimeout, true},
		{"error", usage.StatusUpstreamError, false},
		{"nothing", usage.StatusUpstreamError, false},
	} {
		resp := st.post(t, "/v1/chat/completions", `{"model":"`+tc.model+`","stream":true,"messages":[{"role":"user","content":"`+prompt+`"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.Status != tc.status || e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens != 0 {
			t.Fatalf("%s: event %s, %s, %+v; want %s, estimated, no completion", tc.model, e.Status, e.UsageSource, e.Usage, tc.status)
		}
		if billed := e.Usage.PromptTokens > 100; billed != tc.billed {
			t.Fatalf("%s: prompt_tokens %d; want the prompt billed: %v", tc.model, e.Usage.PromptTokens, tc.billed)
		}
	}
}
