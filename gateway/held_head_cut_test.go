package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestHeldHeadThenCutShortFailsOver: on the native routes the events
// before a stream's first output (Anthropic's message_start, the
// Responses API's response.created, a Gemini chunk with no text) are held, so that a stream that
// fails before any output has sent the client nothing and fails over. A
// stream that broke (a read error) or stalled there did; one that ended
// cleanly there, without its protocol's end (cut short, as the chat
// route calls it, which fails over), did not: the held events were sent
// after all, the client got a 200 whose stream was message_start (or
// response.created) and nothing else, with no error event, and no other
// deployment was tried. Without a fallback the client gets the chat
// route's answer to the same stream, a 502.
func TestHeldHeadThenCutShortFailsOver(t *testing.T) {
	const anthStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n"
	const promptOnly = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\"}]},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":54321,\"totalTokenCount\":54321}}\r\n\r\n"
	const created = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
	for _, c := range []struct {
		name, typ, good, body, path, req, mark string
		header                                 []string
	}{
		{"anthropic", "anthropic", "sim-anthropic", anthStart, "/anthropic/v1/messages",
			`{"model":"mid","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi there"}]}`, "msg_1", []string{"x-api-key", testKey}},
		{"responses", "openai", "sim", created, "/v1/responses", `{"model":"mid","stream":true,"input":"hi there"}`, "resp_1", nil},
		// Gemini: a first chunk with the prompt's count and no text, then the end.
		{"gemini", "gemini", "sim-gemini", promptOnly, "/gemini/v1beta/models/mid:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"hi there"}]}]}`, "54321", []string{"x-goog-api-key", testKey}},
	} {
		for _, fallback := range []bool{true, false} {
			name := c.name
			if !fallback {
				name += ", no fallback"
			}
			t.Run(name, func(t *testing.T) {
				st, hits := badThenSpare(t, c.typ, c.good, c.body, 0, fallback)
				resp := st.post(t, c.path, c.req, c.header...)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if hits.Load() != 1 {
					t.Fatalf("the bad deployment got %d calls, want 1", hits.Load())
				}
				id := resp.Header.Get("X-Request-Id")
				if !fallback {
					if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(b), c.mark) {
						t.Fatalf("status %d, body %q: want a 502, none of the cut stream", resp.StatusCode, b)
					}
					if e := st.sink.event(t, id); e.Status != usage.StatusUpstreamError || e.HTTPStatus != http.StatusBadGateway {
						t.Fatalf("event %s, http_status %d, want upstream_error, 502", e.Status, e.HTTPStatus)
					}
					return
				}
				if resp.StatusCode != 200 || strings.Contains(string(b), c.mark) {
					t.Fatalf("status %d, the client got the cut attempt's bytes: %q", resp.StatusCode, b)
				}
				st.servedBySpare(t, id, false)
			})
		}
	}
}
