package gateway_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestAnswerWithheldWhenItsEventIsNotDurable: with the event stream down
// and the crash journal's disk full while a non-streamed request was
// upstream, the client still got a 200 with the whole answer and its
// usage, for an event held in memory alone and lost to a kill (a crash
// review: a gateway on a full tmpfs, NATS killed under load; a chat
// completion answered 200 with its usage 2 s after its event was logged
// "held in memory", while the streams beside it had their end withheld).
// "Durable before done" holds for a whole answer as for a stream's end:
// the client gets 503 metering_unavailable in its place. Its event, once
// the sink takes it again (owed.go), records what the client got: a 503,
// and no charge (the customer had no answer; the upstream's tokens stay
// the operator's cost, as a retried attempt's): it was recorded as a 200
// and charged in full.
func TestAnswerWithheldWhenItsEventIsNotDurable(t *testing.T) {
	var release chan struct{}
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":5}}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}],"model":"emb-x","usage":{"prompt_tokens":7,"total_tokens":7}}`)
			return
		}
		io.WriteString(w, wholeChatAnswer)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"},
			gateway.ModelConfig{Name: "emb", Provider: "op", UpstreamModel: "emb-x"})
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "ap", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "cl", Provider: "ap", UpstreamModel: "claude-x"})
	})
	for _, c := range []struct{ path, body, usage string }{
		{"/v1/chat/completions", `{"model":"om","messages":[{"role":"user","content":"hi"}]}`, `"completion_tokens":5`},
		{"/v1/embeddings", `{"model":"emb","input":"hi there"}`, `"prompt_tokens":7`},
		// A native route's whole answer (relayBody).
		{"/anthropic/v1/messages", `{"model":"cl","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, `"output_tokens":5`},
	} {
		release = make(chan struct{})
		st.journal.setFailing(nil)
		st.sink.setFail(nil)
		type result struct {
			code int
			body string
			rid  string
		}
		done := make(chan result, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, st.url+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- result{0, err.Error(), ""}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- result{resp.StatusCode, string(b), resp.Header.Get("X-Request-Id")}
		}()
		<-arrived // the request is upstream, begun while the journal wrote
		st.journal.setFailing(errors.New("journal: write: no space left on device"))
		st.sink.setFail(errors.New("nats: no responders; spool: no space left on device"))
		close(release)
		got := <-done
		if got.code == http.StatusOK || strings.Contains(got.body, c.usage) {
			t.Errorf("%s: the client got %d with the answer of a request whose event is in memory alone:\n%s", c.path, got.code, got.body)
		}
		if got.code != http.StatusServiceUnavailable || !strings.Contains(got.body, "usage durably") {
			t.Errorf("%s: %d %s; want 503 saying the usage could not be recorded, in place of the answer", c.path, got.code, got.body)
		}
		st.sink.setFail(nil) // the sink recovers: the event held is offered again within a second
		e := st.sink.event(t, got.rid)
		if !e.NotCharged || e.HTTPStatus != http.StatusServiceUnavailable {
			t.Errorf("%s: the withheld answer's event was recorded with http_status %d, not_charged %v; want 503, not charged (the client got no answer)",
				c.path, e.HTTPStatus, e.NotCharged)
		}
		if e.Usage.CompletionTokens+e.Usage.PromptTokens == 0 {
			t.Errorf("%s: the withheld answer's event lost the upstream's usage (the operator's cost): %+v", c.path, e.Usage)
		}
	}
}
