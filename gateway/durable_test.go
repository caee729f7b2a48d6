package gateway_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestDurableBeforeDone: until the sink says the event is durable, the
// client gets no usage and no end, in every protocol; once it does, the
// client gets them. The first token is not held back.
func TestDurableBeforeDone(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, last string
		header                 []string
		firstContent           string // a line the client gets before the event is durable
	}{
		{"chat stream with usage", "/v1/chat/completions",
			`{"model":"sim-pro","stream":true,"stream_options":{"include_usage":true},"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
			`"prompt_tokens"`, nil, `"content":"tok `},
		{"chat stream without usage", "/v1/chat/completions",
			`{"model":"sim-small","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
			`[DONE]`, nil, `"content":"tok `},
		{"chat translated from Anthropic", "/v1/chat/completions",
			`{"model":"claude-sim","stream":true,"stream_options":{"include_usage":true},"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
			`"prompt_tokens"`, nil, `"content":"tok `},
		{"Anthropic native", "/anthropic/v1/messages",
			`{"model":"claude-sim","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
			`message_delta`, []string{"x-api-key", testKey}, `text_delta`},
		{"Gemini native", "/gemini/v1beta/models/gemini-sim:streamGenerateContent?alt=sse",
			`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":8}}`,
			`finishReason`, []string{"x-goog-api-key", testKey}, `tok `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, nil)
			st.sink.holdEvents(t)
			resp := st.post(t, tc.path, tc.body, tc.header...)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			ls := lines(resp.Body)
			until(t, ls, tc.firstContent) // content streams before the event is made
			select {
			case id := <-st.sink.called:
				if id != resp.Header.Get("X-Request-Id") {
					t.Fatalf("published %s, want the request's id %s", id, resp.Header.Get("X-Request-Id"))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the event was never published")
			}
			// The sink holds the event: nothing that ends the response comes.
			for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
				select {
				case l := <-ls:
					if strings.Contains(l, tc.last) || strings.Contains(l, "[DONE]") || strings.Contains(l, "message_stop") {
						t.Fatalf("the client got %q before the event was durable", l)
					}
				case <-time.After(10 * time.Millisecond):
				}
			}
			st.sink.release()
			until(t, ls, tc.last)
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream {
				t.Fatalf("event %+v, want ok from upstream", e)
			}
		})
	}
}

// TestDurableBeforeBody: a non-streamed answer is sent only once its event
// is durable.
func TestDurableBeforeBody(t *testing.T) {
	st := newStack(t, nil)
	st.sink.holdEvents(t)
	got := make(chan *http.Response, 1)
	go func() {
		got <- st.post(t, "/v1/chat/completions", `{"model":"sim-pro","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	}()
	<-st.sink.called
	select {
	case <-got:
		t.Fatal("the response arrived before the event was durable")
	case <-time.After(200 * time.Millisecond):
	}
	st.sink.release()
	resp := <-got
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"prompt_tokens"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
}

// TestJournalFollowsEachRequest: a request is begun, checkpointed from the
// moment its upstream answers, and ended once its event is durable; one
// whose event the sink refuses is kept (Fail), never lost.
func TestJournalFollowsEachRequest(t *testing.T) {
	st := newStack(t, nil)
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-pro","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"5"}}`)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	st.sink.event(t, id)
	calls := strings.Join(st.journal.of(id), " ")
	if !strings.HasPrefix(calls, "begin checkpoint") || !strings.HasSuffix(calls, "checkpoint end") || strings.Count(calls, "checkpoint") < 3 {
		t.Fatalf("journal calls for the request: %s", calls)
	}

	st.sink.setFail(errSpoolRefused)
	resp = st.post(t, "/v1/chat/completions", `{"model":"sim-small","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	id = resp.Header.Get("X-Request-Id")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		calls := st.journal.of(id)
		if len(calls) > 0 && calls[len(calls)-1] == "fail" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal calls for a request whose event the sink refused: %v", calls)
		}
	}
}

// TestARefusedEventIsPublishedOnceTheSinkRecovers: an event the sink
// refused (NATS and the spool's disk both failing) waited in the crash
// journal for the next start, though the sink came back within seconds:
// the request was missing from the ledger for as long as the process ran.
// It is now offered to the sink again every second, and its journal entry
// ended once it is durable.
func TestARefusedEventIsPublishedOnceTheSinkRecovers(t *testing.T) {
	st := newStack(t, nil)
	st.sink.setFail(errSpoolRefused)
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-small","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if calls := st.journal.of(id); len(calls) > 0 && calls[len(calls)-1] == "fail" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal calls for a request whose event the sink refused: %v", st.journal.of(id))
		}
	}
	time.Sleep(1500 * time.Millisecond) // a round of offers while the sink still refuses
	if n := st.sink.count(); n != 0 {
		t.Fatalf("%d events published while the sink refused them", n)
	}
	// Refused again, it is still owed: its journal entry not ended, or a
	// crash now would lose it.
	if calls := st.journal.of(id); calls[len(calls)-1] != "fail" || slices.Contains(calls, "end") {
		t.Fatalf("journal calls after a refused offer: %v (want it left failed, not ended)", calls)
	}
	st.sink.setFail(nil)
	e := st.sink.event(t, id)
	if e.Usage.CompletionTokens == 0 {
		t.Errorf("the owed event lost its usage: %+v", e.Usage)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if calls := st.journal.of(id); calls[len(calls)-1] == "end" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal calls once the owed event was published: %v (want it ended)", st.journal.of(id))
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if n := st.sink.count(); n != 1 {
		t.Errorf("the owed event was published %d times, want once", n)
	}
	if calls := st.journal.of(id); slices.Index(calls, "end") != len(calls)-1 {
		t.Errorf("journal calls: %v (want one end, once it was published)", calls)
	}
}
