package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// untilCloseUpstream answers every request 200 with body as application/json,
// with neither a Content-Length nor the chunked encoding: the body ends
// when the connection closes (HTTP/1.0's way, which HTTP/1.1 keeps).
func untilCloseUpstream(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"+body)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAnswerCutOffBeforeItsEndIsNotRelayed: a whole answer whose
// connection closed mid-body fails the attempt when the body has a length
// to fall short of (a Content-Length, the chunked encoding, HTTP/2's end
// of stream): 502, none of its output billed. A body delimited by the
// connection's close has none, and the same answer cut off there reached
// the client as a 200 of JSON that ends mid-value (which its SDK cannot
// parse), billed its bytes as output, estimated. Such a body whose JSON
// ends before its value does is now cut off: the attempt fails, as it
// fails when the framing shows it.
func TestAnswerCutOffBeforeItsEndIsNotRelayed(t *testing.T) {
	chat := `{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"the whole answer, which the connection's close cut off before its usage"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":340,"total_tokens":361}}`
	anth := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"the whole answer, which the connection's close cut off before its usage"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":50}}`
	gem := `[{"candidates":[{"content":{"parts":[{"text":"the whole answer, which the connection's close "}],"role":"model"}}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":2,"totalTokenCount":32}},` +
		`{"candidates":[{"content":{"parts":[{"text":"cut off before its end"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":40,"totalTokenCount":70}}]`
	for _, c := range []struct{ name, path, req, body string }{
		{"chat", "/v1/chat/completions", `{"model":"om","messages":[{"role":"user","content":"hello there"}]}`, chat},
		{"chat stream answered with a body", "/v1/chat/completions", `{"model":"om","stream":true,"messages":[{"role":"user","content":"hello there"}]}`, chat},
		{"anthropic native", "/anthropic/v1/messages", `{"model":"cl","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`, anth},
		{"gemini array", "/gemini/v1beta/models/gem:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`, gem},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, whole := range []bool{true, false} {
				body := c.body
				if !whole {
					body = body[:len(body)-60]
				}
				url := untilCloseUpstream(t, body)
				st := newStack(t, func(cf *gateway.Config) {
					cf.Providers = append(cf.Providers,
						gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: url + "/v1", APIKey: "k"},
						gateway.ProviderConfig{Name: "gp", Type: "gemini", BaseURL: url + "/v1beta", APIKey: "k"},
						gateway.ProviderConfig{Name: "ap", Type: "anthropic", BaseURL: url + "/v1", APIKey: "k"})
					cf.Models = append(cf.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"},
						gateway.ModelConfig{Name: "gem", Provider: "gp", UpstreamModel: "gemini-x"},
						gateway.ModelConfig{Name: "cl", Provider: "ap", UpstreamModel: "claude-x"})
				})
				resp := st.post(t, c.path, c.req)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
				switch {
				case whole && (resp.StatusCode != http.StatusOK || e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream):
					t.Errorf("the whole body: client %d %.200q; event %s %s %+v %q; want it served, billed from its usage",
						resp.StatusCode, b, e.Status, e.UsageSource, e.Usage, e.Error)
				case !whole && (resp.StatusCode != http.StatusBadGateway || strings.Contains(string(b), "the whole answer")):
					t.Errorf("the body cut off: client %d %.300q; want 502, not the answer cut off", resp.StatusCode, b)
				case !whole && (e.Status != usage.StatusUpstreamError || e.Usage.CompletionTokens != 0):
					t.Errorf("the body cut off: event %s %s %+v %q; want an upstream_error billing no output", e.Status, e.UsageSource, e.Usage, e.Error)
				}
			}
		})
	}
}
