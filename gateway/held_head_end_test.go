package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHeldHeadThenEndRecordsTheResponse: the events before a stream's
// first output are held (passThrough's head) and go out with the
// response's headers. A stream whose protocol end came right after them
// (Anthropic's message_start then message_stop, no message_delta: an
// empty answer from a compatible server or a flaky one) had its event
// made durable before the headers were written: the client got a 200 and
// every byte, but the event recorded http_status 0 ("none sent") and no
// time to first byte. The Responses API's end is its final report, whose
// hold writes the headers first: it is checked as it stands.
func TestHeldHeadThenEndRecordsTheResponse(t *testing.T) {
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	responses := ev("response.created", `,"response":{"id":"resp_1","status":"in_progress","model":"m","output":[]}`) +
		ev("response.in_progress", `,"response":{"id":"resp_1","status":"in_progress","model":"m","output":[]}`) +
		ev("response.output_item.added", `,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`) +
		ev("response.output_item.done", `,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`) +
		ev("response.incomplete", `,"response":{"id":"resp_1","status":"incomplete","model":"m","incomplete_details":{"reason":"max_output_tokens"},`+
			`"usage":{"input_tokens":12,"output_tokens":16,"output_tokens_details":{"reasoning_tokens":16},"total_tokens":28}}`)
	anthropic := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, c := range []struct {
		name, typ, body, path, req, want string
		header                           []string
	}{
		{"responses", "openai", responses, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, "response.incomplete", nil},
		{"responses, no item", "openai", strings.Split(responses, "event: response.output_item.added")[0] + "event: response.incomplete" + strings.SplitN(responses, "event: response.incomplete", 2)[1], "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, "response.incomplete", nil},
		{"anthropic", "anthropic", anthropic, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"message_stop", []string{"x-api-key", testKey}},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, c.body)
			}))
			t.Cleanup(up.Close)
			st := oneProviderStack(t, c.typ, up.URL)
			e, got := doRequest(t, st, c.path, c.req, c.header...)
			if !strings.HasPrefix(got, c.body[:strings.Index(c.body, "\n")]) || !strings.Contains(got, c.want) {
				t.Fatalf("the client got %q", got)
			}
			if e.HTTPStatus != http.StatusOK || e.TTFTMillis <= 0 {
				t.Errorf("the event records http_status %d, ttft_ms %d; the client got a 200 and the stream", e.HTTPStatus, e.TTFTMillis)
			}
		})
	}
}

// TestChatFromAnthropicEndingAfterMessageStartRecordsTheResponse: on the
// chat route the role chunk of a stream translated from Anthropic waits
// for the first output. A stream that ended with no output and no
// message_delta (message_start, then message_stop: a compatible server's
// empty answer) sent the client nothing before its event was made
// durable, then [DONE] alone: the event recorded http_status 0 for a 200
// the client got. The role chunk now goes out before the commit.
func TestChatFromAnthropicEndingAfterMessageStartRecordsTheResponse(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	st := oneProviderStack(t, "anthropic", up.URL)
	e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(got, `"role":"assistant"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("the client got %q, want the role chunk and [DONE]", got)
	}
	if e.HTTPStatus != http.StatusOK {
		t.Errorf("the event records http_status %d; the client got a 200", e.HTTPStatus)
	}
}
