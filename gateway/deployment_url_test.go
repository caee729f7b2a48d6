package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A deployment whose base_url is wrong (no /v1, a typo, a proxy's root)
// answers every request 404, and the gateway relayed it: the client was
// told the path or the model it asked for was not found, while on a model
// of the table the gateway chose both, and another deployment could serve
// it. What the upstreams say of a path they do not have:
var (
	// OpenAI, for a base_url without /v1.
	openaiInvalidURL = jsonOf(`{"error":{"message":"Invalid URL (POST /chat/completions)","type":"invalid_request_error","param":null,"code":null}}`)
	// OpenAI's older words for it (and upstream-sim's).
	openaiUnknownURL = jsonOf(`{"error":{"message":"Unknown request URL: POST /chat/completions. Please check the URL for typos, or see the docs at https://platform.openai.com/docs/api-reference/.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`)
	// Anthropic, for a path it does not serve.
	anthropicNoPath = jsonOf(`{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`)
	// Go's net/http (Ollama, many servers), as text/plain.
	goNotFound = errorAnswer{"text/plain; charset=utf-8", "404 page not found\n"}
	// FastAPI (vLLM and other Python servers) for a route it does not have.
	fastAPINotFound = jsonOf(`{"detail":"Not Found"}`)
	// nginx, or Google's front end for a path outside the API: a page.
	htmlNotFound = errorAnswer{"text/html; charset=UTF-8",
		"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"}
	// Google for a path with no API version: nothing at all.
	emptyNotFound = errorAnswer{"", ""}
)

// TestAWrongURLFailsOver: a 404 on a model of the table whose body is no
// JSON error object (a page, text, nothing), or whose message says the
// URL or path is not there, is the deployment's failure: the next
// deployment serves, and the broken one rests.
func TestAWrongURLFailsOver(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer errorAnswer
		req    errorUnder200Request
		bad    string
	}{
		{"OpenAI's Invalid URL, chat body", openaiInvalidURL, chatBodyOf("flaky"), "bad-openai"},
		{"OpenAI's Invalid URL, chat stream", openaiInvalidURL, chatStreamOf("flaky"), "bad-openai"},
		{"OpenAI's Invalid URL, responses", openaiInvalidURL, responsesBody, "bad-openai"},
		{"OpenAI's Invalid URL, embeddings", openaiInvalidURL, embeddingsBody, "bad-openai"},
		{"OpenAI's Unknown request URL, chat body", openaiUnknownURL, chatBodyOf("flaky"), "bad-openai"},
		{"404 page not found, chat stream", goNotFound, chatStreamOf("flaky"), "bad-openai"},
		{"FastAPI's Not Found, chat body", fastAPINotFound, chatBodyOf("flaky"), "bad-openai"},
		{"an HTML 404, responses stream", htmlNotFound, responsesStream, "bad-openai"},
		{"Anthropic's Not found, anthropic body", anthropicNoPath, anthropicBody, "bad-anthropic"},
		{"Anthropic's Not found, anthropic stream", anthropicNoPath, anthropicStream, "bad-anthropic"},
		{"Anthropic's Not found, chat body", anthropicNoPath, chatBodyOf("claude-flaky"), "bad-anthropic"},
		{"an HTML 404, gemini body", htmlNotFound, geminiBody, "bad-gemini"},
		{"an empty 404, gemini stream", emptyNotFound, geminiStream, "bad-gemini"},
		{"an empty 404, chat stream from Gemini", emptyNotFound, chatStreamOf("gemini-flaky"), "bad-gemini"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := refusingStack(t, http.StatusNotFound, c.answer, nil)
			code, body, id := st.send(t, c.req)
			if code != http.StatusOK || saysNotFound(body) {
				t.Fatalf("client got %d %s, want the next deployment's answer", code, body)
			}
			wantFailedOver(t, st, c.req, id, c.bad, hits, func(e string) bool { return e == "upstream status 404: the deployment's URL was not found" })
		})
	}
}

// TestAWrongURLOnTheLastAttempt: with no deployment left, the client gets
// 502 (in its route's envelope) saying the deployment's URL was not found
// and the operator must check its base_url, not the upstream's 404; the
// event is an upstream_error that bills nothing, and the deployment rests.
func TestAWrongURLOnTheLastAttempt(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer errorAnswer
		req    errorUnder200Request
		bad    string
		code   string // the route's envelope's
	}{
		{"chat body", openaiInvalidURL, chatBodyOf("flaky"), "bad-openai", "upstream_error"},
		{"chat stream, text", goNotFound, chatStreamOf("flaky"), "bad-openai", "upstream_error"},
		{"anthropic body", anthropicNoPath, anthropicBody, "bad-anthropic", "api_error"},
		{"gemini stream, a page", htmlNotFound, geminiStream, "bad-gemini", "UNAVAILABLE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := refusingStack(t, http.StatusNotFound, c.answer, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			code, body, id := st.send(t, c.req)
			if code != http.StatusBadGateway || !strings.Contains(body, "URL was not found") ||
				!strings.Contains(body, "base_url") || !strings.Contains(body, c.code) || strings.Contains(body, "nginx") {
				t.Fatalf("client got %d %s, want 502 naming the deployment's URL", code, body)
			}
			e := st.sink.event(t, id)
			if e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 ||
				e.Error != "upstream status 404: the deployment's URL was not found" || e.HTTPStatus != http.StatusBadGateway {
				t.Fatalf("event %+v", e)
			}
			wantRested(t, st, c.req, c.bad, hits)
		})
	}
}

// TestABaseURLWithoutItsVersion: upstream-sim under a base_url without
// /v1 answers OpenAI's "Unknown request URL" 404 to every request: the
// model's other deployment serves, and the broken one rests.
func TestABaseURLWithoutItsVersion(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "no-version", Type: "openai",
			BaseURL: strings.TrimSuffix(c.Providers[0].BaseURL, "/v1")})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "typo", Deployments: []gateway.DeploymentConfig{
			{Name: "no-version", Provider: "no-version", UpstreamModel: "sim-small"}}, Fallbacks: []string{"sim-small"}})
	})
	code, body, id := st.send(t, chatBodyOf("typo"))
	if code != http.StatusOK {
		t.Fatalf("client got %d %s, want the fallback's answer", code, body)
	}
	if e := st.sink.event(t, id); e.Attempt != 2 || e.Deployment == "no-version" {
		t.Fatalf("served %+v, want the fallback's second attempt", e)
	}
}

// TestAClientsPathLike404IsRelayed: the same answers on a
// "provider/model" name outside the table (the client's choice) are the
// client's, relayed with their 404, resting nothing; and a JSON error
// whose message names what was not found (an id the client sent) is
// relayed on a model of the table too.
func TestAClientsPathLike404IsRelayed(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer errorAnswer
		req    errorUnder200Request
		want   string
	}{
		{"Invalid URL on a name outside the table", openaiInvalidURL, chatBodyOf("bad-openai/gpt-x"), "Invalid URL"},
		{"a text 404 on a name outside the table", goNotFound, chatBodyOf("bad-openai/gpt-x"), "page not found"},
		{"an id the client sent", jsonOf(`{"error":{"message":"No response found with id 'resp_1'.","type":"invalid_request_error","param":null,"code":null}}`),
			errorUnder200Request{"/v1/responses", `{"model":"flaky","input":"hi there","previous_response_id":"resp_1"}`, nil}, "resp_1"},
		{"a container the client sent", jsonOf(`{"type":"error","error":{"type":"not_found_error","message":"Container not found: cntr_1"}}`),
			anthropicBody, "cntr_1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantRelayed404(t, c.answer, c.req, c.want)
		})
	}
}

// saysNotFound reports whether body, what the client got, holds any of
// the wrong path's answers above.
func saysNotFound(body string) bool {
	for _, w := range []string{"Invalid URL", "Unknown request URL", "page not found", "Not Found", "Not found", "nginx"} {
		if strings.Contains(body, w) {
			return true
		}
	}
	return false
}
