package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A captive portal, a base_url that names a web site, or a proxy's error
// page answers 200 with a web page. The gateway relayed it as the answer
// and billed it (the prompt and the page's bytes as output, estimated):
// a customer charged for an HTML page, no other deployment tried, and the
// broken one keeping its share of the traffic. It is the deployment's
// failure, as a 5xx is: the next deployment serves, and the broken one
// rests; on the last attempt the client gets 502, and nothing is billed.
var (
	portalPage = errorAnswer{"text/html; charset=utf-8",
		"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head><body>Wi-Fi login</body></html>"}
	bareWebPage = errorAnswer{"", "\n<html><body>Wi-Fi login</body></html>"} // no Content-Type at all
)

func TestAWebPageUnderA200FailsOver(t *testing.T) {
	for _, page := range []struct {
		name string
		a    errorAnswer
	}{{"text/html", portalPage}, {"no Content-Type", bareWebPage}} {
		for _, c := range []struct {
			name string
			req  errorUnder200Request
			bad  string
		}{
			{"chat body", chatBodyOf("flaky"), "bad-openai"},
			{"chat stream", chatStreamOf("flaky"), "bad-openai"},
			{"responses body", responsesBody, "bad-openai"},
			{"responses stream", responsesStream, "bad-openai"},
			{"embeddings", embeddingsBody, "bad-openai"},
			{"chat body from Anthropic", chatBodyOf("claude-flaky"), "bad-anthropic"},
			{"chat stream from Gemini", chatStreamOf("gemini-flaky"), "bad-gemini"},
			{"anthropic body", anthropicBody, "bad-anthropic"},
			{"anthropic stream", anthropicStream, "bad-anthropic"},
			{"gemini body", geminiBody, "bad-gemini"},
			{"gemini stream", geminiStream, "bad-gemini"},
		} {
			t.Run(page.name+" "+c.name, func(t *testing.T) {
				st, hits := flakyStack(t, page.a, nil)
				code, body, id := st.send(t, c.req)
				if code != http.StatusOK || strings.Contains(body, "Wi-Fi") {
					t.Fatalf("client got %d %s, want the next deployment's answer", code, body)
				}
				wantFailedOver(t, st, c.req, id, c.bad, hits, func(e string) bool { return strings.Contains(e, "not an API answer") })
			})
		}
	}
}

// TestAWebPageUnderA200OnTheLastAttempt: with no deployment left, the
// client gets 502 upstream_error naming what came, not the page; the
// event is an upstream_error that bills nothing, and the deployment rests.
func TestAWebPageUnderA200OnTheLastAttempt(t *testing.T) {
	for _, c := range []struct {
		name string
		a    errorAnswer
		req  errorUnder200Request
		bad  string
		says string
		code string // the route's envelope's: OpenAI's upstream_error, Anthropic's api_error, Gemini's UNAVAILABLE
	}{
		{"chat body", portalPage, chatBodyOf("flaky"), "bad-openai", "text/html", "upstream_error"},
		{"chat stream", portalPage, chatStreamOf("flaky"), "bad-openai", "text/html", "upstream_error"},
		{"chat stream, no Content-Type", bareWebPage, chatStreamOf("flaky"), "bad-openai", "<", "upstream_error"},
		{"anthropic stream", portalPage, anthropicStream, "bad-anthropic", "text/html", "api_error"},
		{"gemini body", bareWebPage, geminiBody, "bad-gemini", "<", "UNAVAILABLE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := flakyStack(t, c.a, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			code, body, id := st.send(t, c.req)
			if code != http.StatusBadGateway || strings.Contains(body, "Wi-Fi") || !strings.Contains(body, c.code) ||
				!strings.Contains(body, "not an API answer") || !strings.Contains(body, c.says) {
				t.Fatalf("client got %d %s, want 502 upstream_error naming what came", code, body)
			}
			e := st.sink.event(t, id)
			if e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 || e.HTTPStatus != http.StatusBadGateway {
				t.Fatalf("event %+v, want an upstream_error billing nothing", e)
			}
			wantRested(t, st, c.req, c.bad, hits)
		})
	}
}

// TestAnAnswerWithNoContentTypeIsServed: an answer that is the API's, with
// no Content-Type (or a text one), is served and billed as before: only a
// body beginning with '<' is a page.
func TestAnAnswerWithNoContentTypeIsServed(t *testing.T) {
	chunk := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	answer := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	for _, c := range []struct {
		name string
		a    errorAnswer
		req  errorUnder200Request
	}{
		{"stream", errorAnswer{"", "data: " + chunk + "\n\ndata: [DONE]\n\n"}, chatStreamOf("flaky")},
		{"body", errorAnswer{"", "  " + answer}, chatBodyOf("flaky")},
		{"text/plain stream", errorAnswer{"text/plain", "data: " + chunk + "\n\ndata: [DONE]\n\n"}, chatStreamOf("flaky")},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := flakyStack(t, c.a, nil)
			code, body, id := st.send(t, c.req)
			if code != http.StatusOK || !strings.Contains(body, "hello") {
				t.Fatalf("client got %d %s, want the answer", code, body)
			}
			if e := st.sink.event(t, id); e.Deployment != "bad-openai" || e.Status != usage.StatusOK || e.Usage.PromptTokens != 3 {
				t.Fatalf("event %+v, want the answer served and billed from its usage", e)
			}
		})
	}
}
