package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAnswerWithOutputAndErrorIsNotFailedOver: a 200 whose answer holds
// output and also the provider's error (OpenRouter's mid-generation error
// on a non-streamed answer) is an answer: the client gets it, from the one
// attempt, and its event is charged. Only an error with no output under a
// 200 fails over (errorUnder200). A mutant that dropped the output check
// passed every failover test: the client's answer was thrown away, another
// deployment asked, and the output billed upstream became the operator's.
func TestAnswerWithOutputAndErrorIsNotFailedOver(t *testing.T) {
	st := stubFirstStack(t, "halting", "half", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"partial answer"},"finish_reason":"error"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8},`+
			`"error":{"type":"server_error","message":"the model stopped mid-generation"}}`)
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"halting","messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "partial answer") {
		t.Fatalf("status %d: %s; want the answer with its output", resp.StatusCode, body)
	}
	evs := st.sink.eventsOf(resp.Header.Get("X-Request-Id"))
	if len(evs) != 1 || evs[0].Deployment != "half" || evs[0].NotCharged || evs[0].Usage.CompletionTokens != 3 {
		t.Fatalf("attempts %+v, want half's answer alone, charged its 3 completion tokens", evs)
	}
	if n := st.simStats(t).ByDeployment["other"].Requests.OK; n != 0 {
		t.Errorf("the other deployment served %d requests, want none", n)
	}
}
