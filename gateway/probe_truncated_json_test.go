package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestChatAnswerCutMidBodyIsRelayedAs200: a non-streamed chat answer whose
// upstream closes the connection in the middle of its JSON body (`..."content":
// "hello world and more words here"` and no more) is recorded as an
// upstream_error ("unreadable upstream body: unexpected EOF"), yet the client
// gets 200 with the truncated bytes as application/json, which its SDK fails
// to decode. The client should get the OpenAI error envelope (502
// upstream_error) that the event already describes; billing the relayed
// output, as now, is a separate choice.
func TestChatAnswerCutMidBodyIsRelayedAs200(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello world and more words here"`
	st := oneProviderStack(t, "openai", jsonUpstream(t, "application/json", body).URL)
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	var answer struct {
		Error *struct{ Message string } `json:"error"`
	}
	if resp.StatusCode == http.StatusOK || json.Unmarshal(b, &answer) != nil || answer.Error == nil {
		t.Errorf("the client got %d %s; event %s (%q): want an OpenAI error envelope, not the upstream's broken body",
			resp.StatusCode, b, e.Status, e.Error)
	}
}
