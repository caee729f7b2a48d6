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
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCutStreamBillsTheReasoningItShowed: a stream from an
// OpenAI-compatible provider that streams its reasoning as text
// (DeepSeek's reasoning_content), cut short after only reasoning (the
// client left, and the upstream sent no usage before drain_timeout), was
// billed that reasoning as completion tokens with reasoning_tokens 0, and
// so was the same stream recovered from the crash journal: a model's
// reasoning price never applied to it. Both now count the reasoning shown
// as reasoning_tokens, within completion_tokens.
func TestCutStreamBillsTheReasoningItShowed(t *testing.T) {
	const thought = "let me think about this carefully "
	chunk := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"` + thought + `"},"finish_reason":null}]}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, strings.Repeat(chunk, 10))
		w.(http.Flusher).Flush()
		holdOpen(r, 5*time.Second)
	}))
	t.Cleanup(up.Close)
	cfg := func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789"}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
		c.DrainTimeout = 100 * time.Millisecond
	}
	st := newStack(t, cfg)
	const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"think"}]}`
	e := cancelAfter(t, st, "/v1/chat/completions", body, "carefully")
	if e.Status != usage.StatusClientCancelled || e.UsageSource != usage.SourceEstimated ||
		e.Usage.ReasoningTokens <= 0 || e.Usage.ReasoningTokens != e.Usage.CompletionTokens {
		t.Fatalf("cancelled after reasoning only: %s %s usage %+v; want client_cancelled, estimated, all the completion reasoning",
			e.Status, e.UsageSource, e.Usage)
	}
	want := e.Usage.ReasoningTokens

	// The same stream in flight at a crash, recovered from the journal.
	dir := t.TempDir()
	j, _, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := gateway.Config{}
	cfg(&c)
	gw, err := gateway.New(c, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(context.Background())
	st.url = "http://" + gw.Addr()
	resp := st.post(t, "/v1/chat/completions", body)
	defer resp.Body.Close()
	ls := lines(resp.Body)
	for seen := 0; seen < 10; {
		if l := until(t, ls, "carefully"); len(l) > 0 {
			seen++
		}
	}
	var reqs []journal.Request
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		reqs = killSnapshot(t, dir)
		if len(reqs) == 1 && reqs[0].OutputLen == 10*len(thought) || time.Now().After(deadline) {
			break
		}
	}
	if len(reqs) != 1 {
		t.Fatalf("recovered %d requests, want the one in flight", len(reqs))
	}
	r := gw.Recover(reqs)[0]
	if r.Status != usage.StatusCrashed || r.Usage.ReasoningTokens != want || r.Usage.CompletionTokens != want {
		t.Fatalf("recovered after reasoning only: %s %s usage %+v; want crashed, %d reasoning tokens, all the completion",
			r.Status, r.UsageSource, r.Usage, want)
	}
}
