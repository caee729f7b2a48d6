package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestHTTPStatusOfAClientGoneBeforeItsAnswer: a client that left a
// non-streamed request before its answer (its status client_cancelled,
// the answer drained for its usage) was recorded with http_status 200,
// though it was sent nothing: the event's http_status is the status the
// gateway sent the client, 0 if none (usage.Event.HTTPStatus), as a
// streamed request whose client left before the status line records it.
// Chat completions, embeddings and Anthropic's native route each answer
// here after the client has left; each event bills the upstream's usage
// and records no status sent.
func TestHTTPStatusOfAClientGoneBeforeItsAnswer(t *testing.T) {
	const answerAfter, leaveAfter = 400 * time.Millisecond, 100 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(answerAfter):
		case <-r.Context().Done():
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/embeddings"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}],"model":"gpt-x","usage":{"prompt_tokens":9,"total_tokens":9}}`)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":5}}`)
		case strings.Contains(string(b), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}`+"\n\n"+
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`+"\n\n"+
				"data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, wholeChatAnswer)
		}
	}))
	defer up.Close()
	cfg, _ := simConfig(t)
	cfg = withModelOm(cfg, up.URL)
	cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "ap", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k"})
	cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "am", Provider: "ap", UpstreamModel: "claude-x"})
	sink := &memSink{}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: &memJournal{}})
	for _, tc := range []struct {
		name, path, body string
		completion       int64
	}{
		{"chat", "/v1/chat/completions", `{"model":"om","user":"gone-chat","messages":[{"role":"user","content":"hi"}]}`, 5},
		{"chat stream", "/v1/chat/completions", `{"model":"om","user":"gone-stream","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 5},
		{"embeddings", "/v1/embeddings", `{"model":"om","user":"gone-embeddings","input":"hi"}`, 0},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"am","max_tokens":10,"metadata":{"user_id":"gone-native"},"messages":[{"role":"user","content":"hi"}]}`, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), leaveAfter)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+gw.Addr()+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+testKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("answered %d before the client left; the upstream answers after %s", resp.StatusCode, answerAfter)
			}
			e := sink.eventWhere(t, tc.name, func(e *usage.Event) bool {
				return e.Endpoint == tc.path && e.Stream == strings.Contains(tc.body, `"stream":true`)
			})
			if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceUpstream ||
				e.Usage.PromptTokens != 9 || e.Usage.CompletionTokens != tc.completion {
				t.Fatalf("event %s (%q), usage %+v (%s); want client_cancelled billing the upstream's 9 + %d tokens",
					e.Status, e.Error, e.Usage, e.UsageSource, tc.completion)
			}
			if e.HTTPStatus != 0 {
				t.Errorf("http_status %d; the client left before its answer and was sent no status: want 0", e.HTTPStatus)
			}
		})
	}
}
