package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

func begun(id, endpoint string) usage.Event {
	return usage.Event{Version: 1, ID: id, Time: time.Now().UTC(), CustomerID: testCustomer, KeyID: testKeyID,
		Provider: "sim", Model: "sim-pro", Endpoint: endpoint, Stream: true, Status: usage.StatusOK,
		UsageSource: usage.SourceEstimated}
}

// TestRecover: what a crashed process left in its journal becomes one
// event per request, status crashed, usage estimated as documented.
func TestRecover(t *testing.T) {
	st := newStack(t, nil)
	body := []byte(`{"model":"sim-pro","stream":true,"messages":[{"role":"user","content":"word word word"}]}`)
	now := time.Now()
	hiddenReasoning := begun("0197a3c2-0000-7000-8000-000000000001", "/v1/chat/completions")
	hiddenReasoning.Usage.ReasoningTokens = 5                                                // the model's recent average, journaled at the start
	hiddenReasoning.Corrections = "model_cleaned," + usage.CorrectionReasoningOverCompletion // as gateways before 2026-12-03 journaled it
	final := begun("0197a3c2-0000-7000-8000-000000000004", "/v1/chat/completions")
	final.Usage = usage.Tokens{PromptTokens: 3, CompletionTokens: 2}
	reqs := []journal.Request{
		{Event: hiddenReasoning, Body: body, BodyLen: len(body), Output: []byte("tok tok"), OutputLen: 7,
			Checkpoints: 2, Began: now, Last: now.Add(120 * time.Millisecond)},
		{Event: begun("0197a3c2-0000-7000-8000-000000000002", "/anthropic/v1/messages"), Body: []byte(`{}`), BodyLen: 2,
			Output: []byte("tok tok tok"), OutputLen: 11, Checkpoints: 3, Began: now, Last: now,
			Reported: &usage.Tokens{PromptTokens: 12, CachedTokens: 6, CompletionTokens: 1}},
		{Event: begun("0197a3c2-0000-7000-8000-000000000003", "/v1/chat/completions"), Body: body, BodyLen: len(body), Began: now, Last: now},
		{Event: final, Final: &final},
		{Event: begun("0197a3c2-0000-7000-8000-000000000005", "/v1/chat/completions"), Body: body[:10], BodyLen: 4000,
			Checkpoints: 1, Began: now, Last: now},
	}
	got := st.gw.Recover(reqs)
	want := []struct {
		status usage.Status
		source usage.Source
		tokens usage.Tokens
	}{
		// 3 prompt words + 4 for the message + 3 to prime the reply; 2
		// output tokens + 5 hidden reasoning tokens.
		{usage.StatusCrashed, usage.SourceEstimated, usage.Tokens{PromptTokens: 10, CompletionTokens: 7, ReasoningTokens: 5}},
		// The provider's report, completion raised to the 3 tokens streamed.
		{usage.StatusCrashed, usage.SourcePartial, usage.Tokens{PromptTokens: 12, CachedTokens: 6, CompletionTokens: 3}},
		// The upstream had not answered: nothing billed.
		{usage.StatusCrashed, usage.SourceEstimated, usage.Tokens{}},
		// A final event that was not durable: as it was.
		{usage.StatusOK, usage.SourceEstimated, usage.Tokens{PromptTokens: 3, CompletionTokens: 2}},
		// A body longer than the journal keeps: 4 bytes a token.
		{usage.StatusCrashed, usage.SourceEstimated, usage.Tokens{PromptTokens: 1000}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		if e.ID != reqs[i].Event.ID || e.Status != w.status || e.UsageSource != w.source || e.Usage != w.tokens {
			t.Errorf("request %d: %s %s %s %+v; want %s %s %+v", i, e.ID, e.Status, e.UsageSource, e.Usage, w.status, w.source, w.tokens)
		}
		if err := e.Validate(); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if got[0].DurationMillis != 120 || !strings.Contains(got[0].Error, "5 reasoning tokens") {
		t.Errorf("request 0: duration %d, error %q", got[0].DurationMillis, got[0].Error)
	}
	// 5 reasoning tokens within 7 completion tokens: not flagged; the
	// journaled correction that is no placeholder's is kept.
	if got[0].Corrections != "model_cleaned" {
		t.Errorf("request 0: corrections %q, want model_cleaned alone", got[0].Corrections)
	}
}

// TestCrashSnapshotRecoversAStreamInFlight: the journal a real gateway
// writes, copied mid-stream as a kill -9 would leave it, recovers the
// stream with the prompt upstream-sim bills and the output streamed so far.
func TestCrashSnapshotRecoversAStreamInFlight(t *testing.T) {
	dir := t.TempDir()
	j, _, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	st := newStack(t, nil)
	gw, err := gateway.New(gateway.Config{Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
		Models: []gateway.ModelConfig{{Name: "sim-small", Provider: "sim"}}},
		gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(context.Background())
	st.url = "http://" + gw.Addr()
	body := `{"model":"sim-small","stream":true,"max_tokens":20,"messages":[{"role":"system","content":"be brief"},` +
		`{"role":"user","content":"say something long please"}],"metadata":{"sim_delay_ms":"40"}}`
	resp := st.post(t, "/v1/chat/completions", body)
	defer resp.Body.Close()
	ls := lines(resp.Body)
	seen := 0
	for seen < 8 {
		if l := until(t, ls, `"content":"tok `); len(l) > 0 {
			seen++
		}
	}
	time.Sleep(30 * time.Millisecond) // a checkpoint, and the journal's write
	reqs := killSnapshot(t, dir)
	if len(reqs) != 1 {
		t.Fatalf("recovered %d requests, want the one in flight", len(reqs))
	}
	e := gw.Recover(reqs)[0]
	prompt, _ := sim.PromptTokens([]byte(body))
	if e.ID != resp.Header.Get("X-Request-Id") || e.Status != usage.StatusCrashed || e.Usage.PromptTokens != prompt ||
		e.Usage.CompletionTokens < 8 || e.Usage.CompletionTokens > 9 {
		t.Fatalf("recovered %+v; want the request, crashed, %d prompt tokens as upstream-sim bills them, 8 or 9 completion tokens", e, prompt)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}

// TestHiddenReasoningCarriesOver: a gateway learns, per model, the
// reasoning a provider reports but does not stream, journals it, and a
// gateway started with those averages journals each request with them from
// its first request, before it has learnt anything itself.
func TestHiddenReasoningCarriesOver(t *testing.T) {
	st := newStack(t, nil)
	for range 3 {
		resp := st.post(t, "/v1/chat/completions", `{"model":"sim-pro","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		st.sink.event(t, resp.Header.Get("X-Request-Id"))
	}
	if err := st.gw.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.journal.mu.Lock()
	learnt := st.journal.hidden
	st.journal.mu.Unlock()
	if learnt["sim-pro"] != 10 { // upstream-sim's sim-pro spends half of max_tokens on reasoning, unseen
		t.Fatalf("journaled averages %v, want sim-pro at 10", learnt)
	}
	j := &memJournal{}
	gw, err := gateway.New(gateway.Config{Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
		Models: []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"}}},
		gateway.Deps{Providers: providers(), Keys: keys{}, Sink: &memSink{}, Journal: j, HiddenReasoning: learnt})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(context.Background())
	next := &stack{url: "http://" + gw.Addr()}
	resp := next.post(t, "/v1/chat/completions", `{"model":"sim-pro","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if got := j.begunReasoning(resp.Header.Get("X-Request-Id")); got != 10 {
		t.Fatalf("the new gateway journaled its first request expecting %d hidden reasoning tokens, want 10", got)
	}
	// Reasoning expected of a request that has no output yet is no
	// correction: a crashed event would carry it into the ledger.
	j.mu.Lock()
	flagged := j.begunWith[resp.Header.Get("X-Request-Id")]
	j.mu.Unlock()
	if flagged != "" {
		t.Fatalf("journaled with corrections %q, want none", flagged)
	}
}

// TestABurstBeforeAPauseIsJournaled: a few events, then an upstream that
// pauses (a model thinking): the events are in the journal during the
// pause, on the chat route and a native one. They were journaled only
// with the event after the pause, and a crash in it lost them (a crash
// review).
func TestABurstBeforeAPauseIsJournaled(t *testing.T) {
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"native", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if strings.HasSuffix(r.URL.Path, "/responses") {
					_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\"}}\n\n")
					for _, w2 := range []string{"alpha ", "beta ", "gamma"} {
						_, _ = io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\""+w2+"\"}\n\n")
					}
				} else {
					for _, w2 := range []string{"alpha ", "beta ", "gamma"} {
						_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+w2+`"}}]}`+"\n\n")
					}
				}
				w.(http.Flusher).Flush()
				<-release
			}))
			defer up.Close()
			defer close(release) // before up.Close, which waits for the handler
			st := oneProviderStack(t, "openai", up.URL)
			resp := st.post(t, c.path, c.body)
			defer resp.Body.Close()
			ls := lines(resp.Body)
			until(t, ls, "gamma")
			id := resp.Header.Get("X-Request-Id")
			deadline := time.Now().Add(2 * time.Second)
			for !strings.Contains(st.journal.output(id), "gamma") {
				if time.Now().After(deadline) {
					t.Fatalf("2 s into the pause the journal holds %q of the output", st.journal.output(id))
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestRecoveredHiddenReasoningWithinTheOutputLimit (a review): a crashed
// request that stated max_completion_tokens 50 is billed no more than 50
// completion tokens, as the same request cut short is: the begin record
// journals the hidden reasoning against no output yet, and Recover added
// it whole to the output counted (1,802 for an estimate of 1,800).
func TestRecoveredHiddenReasoningWithinTheOutputLimit(t *testing.T) {
	st := newStack(t, nil)
	body := []byte(`{"model":"sim-pro","stream":true,"max_completion_tokens":50,"messages":[{"role":"user","content":"word word word"}]}`)
	now := time.Now()
	e := begun("0197a3c2-0000-7000-8000-0000000000a1", "/v1/chat/completions")
	e.Usage.ReasoningTokens = 1800 // journaled by an older gateway, or a median floor against no output
	got := st.gw.Recover([]journal.Request{{Event: e, Body: body, BodyLen: len(body), Output: []byte("tok tok"), OutputLen: 7,
		Checkpoints: 2, Began: now, Last: now.Add(100 * time.Millisecond)}})
	if u := got[0].Usage; u.CompletionTokens != 50 || u.ReasoningTokens <= 0 || u.ReasoningTokens >= 50 {
		t.Errorf("recovered crash of a request with max_completion_tokens 50: %+v; want 50 completion tokens, the reasoning what the output left", u)
	}
	// A request that turned reasoning off spent none, whatever was journaled.
	off := []byte(`{"model":"sim-pro","stream":true,"reasoning_effort":"none","messages":[{"role":"user","content":"word word word"}]}`)
	got = st.gw.Recover([]journal.Request{{Event: e, Body: off, BodyLen: len(off), Output: []byte("tok tok"), OutputLen: 7,
		Checkpoints: 2, Began: now, Last: now.Add(100 * time.Millisecond)}})
	if u := got[0].Usage; u.ReasoningTokens != 0 {
		t.Errorf("recovered crash of a request with reasoning_effort none: %+v; want no reasoning", u)
	}
	// A body the journal cut short is not read for its limit.
	got = st.gw.Recover([]journal.Request{{Event: e, Body: body[:40], BodyLen: len(body), Output: []byte("tok tok"), OutputLen: 7,
		Checkpoints: 2, Began: now, Last: now.Add(100 * time.Millisecond)}})
	if u := got[0].Usage; u.ReasoningTokens != 1800 {
		t.Errorf("recovered crash whose journaled body was cut: %+v; want the journaled 1800 reasoning tokens", u)
	}
}
