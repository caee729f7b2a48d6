package gateway_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// encodedStack is a gateway whose providers of each type (models "om",
// "cl", "gem") answer every request 200 with body under contentType and
// Content-Encoding coding, which the gateway never asked for (none when
// coding is "").
func encodedStack(t *testing.T, contentType, coding, body string) *stack {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", contentType)
		if coding != "" {
			w.Header().Set("Content-Encoding", coding)
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	return newStack(t, threeProviders(up.URL))
}

// TestAnswerInACodingNotAskedForIsNotRelayed: the gateway asks upstreams
// for gzip only (net/http's transport asks, and undoes it). An upstream
// (a proxy compressing what it serves) that answered 200 in another
// coding (br, zstd, deflate) had its compressed bytes relayed to the
// client as the answer, without the Content-Encoding that says how to
// read them, under an application/json or text/event-stream label
// (and, on the chat stream route, with the gateway's own error chunk
// written into the compressed stream): the client could read none of
// it, yet was billed its bytes as output, estimated. Such an answer is
// now the deployment's failure before any output, as a web page under a
// 200 is: 502 naming the coding, nothing billed.
func TestAnswerInACodingNotAskedForIsNotRelayed(t *testing.T) {
	compressed := "\x28\xb5\x2f\xfd\x00\x58\x11\x00\x00hello, compressed"
	for _, c := range []struct {
		name, coding, ct, path, req string
	}{
		{"chat br", "br", "application/json", "/v1/chat/completions", `{"model":"om","messages":[{"role":"user","content":"hello there"}]}`},
		{"chat stream zstd", "zstd", "text/event-stream", "/v1/chat/completions",
			`{"model":"om","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there"}]}`},
		{"responses stream deflate", "deflate", "text/event-stream", "/v1/responses", `{"model":"om","stream":true,"input":"hello"}`},
		{"anthropic native zstd", "zstd", "application/json", "/anthropic/v1/messages", `{"model":"cl","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`},
		{"gemini native stream br", "br", "text/event-stream", "/gemini/v1beta/models/gem:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := encodedStack(t, c.ct, c.coding, compressed)
			resp := st.post(t, c.path, c.req)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "Content-Encoding") {
				t.Errorf("client: %d %q; want 502 naming the coding", resp.StatusCode, b)
			}
			if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, c.coding) || e.Usage != (usage.Tokens{}) {
				t.Errorf("event: status %s, source %s, usage %+v, error %q; want an upstream_error naming %s, nothing billed",
					e.Status, e.UsageSource, e.Usage, e.Error, c.coding)
			}
		})
	}
	// gzip, which net/http asked for, is undone, and the answer served
	// and billed from its usage; identity is no coding at all.
	answer := `{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"the whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":340,"total_tokens":361}}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, answer)
	_ = zw.Close()
	for coding, body := range map[string]string{"gzip": gz.String(), "identity": answer} {
		st := encodedStack(t, "application/json", coding, body)
		resp := st.post(t, "/v1/chat/completions", `{"model":"om","messages":[{"role":"user","content":"hello there"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "the whole answer") || e.Status != usage.StatusOK ||
			e.UsageSource != usage.SourceUpstream || e.Usage.CompletionTokens != 340 {
			t.Errorf("%s: client %d %.200q; event %s %s %+v; want the answer, billed from its usage", coding, resp.StatusCode, b, e.Status, e.UsageSource, e.Usage)
		}
	}
}
