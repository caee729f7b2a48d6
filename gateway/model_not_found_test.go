package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The providers' answers to a model they do not serve (an upstream_model
// the operator configured, since retired or mistyped).
var (
	openaiModelGone    = `{"error":{"message":"The model ` + "`sim-small`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	anthropicModelGone = `{"type":"error","error":{"type":"not_found_error","message":"model: sim-pro"}}`
	geminiModelGone    = `{"error":{"code":404,"message":"models/sim-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}`
)

// TestAModelNotFoundFailsOver: a 404 that says the deployment's model is
// not found, on a model of the table (the gateway chose the upstream
// model, the client named the gateway's), was relayed: the client was
// told the model it asked for, which the gateway serves, does not exist,
// and could do nothing about it, while another deployment of the model
// could have served it and the broken one kept its share of the traffic.
// It is the deployment's failure: the next deployment serves, and the
// broken one rests.
func TestAModelNotFoundFailsOver(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer string
		req    errorUnder200Request
		bad    string
	}{
		{"chat body", openaiModelGone, chatBodyOf("flaky"), "bad-openai"},
		{"chat stream", openaiModelGone, chatStreamOf("flaky"), "bad-openai"},
		{"responses body", openaiModelGone, responsesBody, "bad-openai"},
		{"chat body from Anthropic", anthropicModelGone, chatBodyOf("claude-flaky"), "bad-anthropic"},
		{"anthropic body", anthropicModelGone, anthropicBody, "bad-anthropic"},
		{"anthropic stream", anthropicModelGone, anthropicStream, "bad-anthropic"},
		{"gemini body", geminiModelGone, geminiBody, "bad-gemini"},
		{"gemini stream", geminiModelGone, geminiStream, "bad-gemini"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := refusingStack(t, http.StatusNotFound, jsonOf(c.answer), nil)
			code, body, id := st.send(t, c.req)
			if code != http.StatusOK || strings.Contains(body, "not_found") || strings.Contains(body, "NOT_FOUND") {
				t.Fatalf("client got %d %s, want the next deployment's answer", code, body)
			}
			wantFailedOver(t, st, c.req, id, c.bad, hits, func(e string) bool { return strings.HasPrefix(e, "upstream status 404") })
		})
	}
}

// TestAModelNotFoundOnTheLastAttempt: with no deployment left, the client
// gets 502, saying the deployment's model was not found and the operator
// must fix it (not 404 for the model it asked for, which the gateway
// lists), the event and the log "upstream status 404"; the deployment rests.
func TestAModelNotFoundOnTheLastAttempt(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer string
		req    errorUnder200Request
		bad    string
	}{
		{"chat body", openaiModelGone, chatBodyOf("flaky"), "bad-openai"},
		{"anthropic body", anthropicModelGone, anthropicBody, "bad-anthropic"},
		{"gemini stream", geminiModelGone, geminiStream, "bad-gemini"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := refusingStack(t, http.StatusNotFound, jsonOf(c.answer), func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			code, body, id := st.send(t, c.req)
			if code != http.StatusBadGateway || !strings.Contains(body, "model was not found") || !strings.Contains(body, "operator") {
				t.Fatalf("client got %d %s, want 502 naming the deployment's model", code, body)
			}
			e := st.sink.event(t, id)
			if e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 ||
				!strings.HasPrefix(e.Error, "upstream status 404") || e.HTTPStatus != http.StatusBadGateway {
				t.Fatalf("event %+v", e)
			}
			wantRested(t, st, c.req, c.bad, hits)
		})
	}
}

// TestAClientsNotFoundIsRelayed: a 404 that is the client's own (an id it
// sent that the provider does not know), and a model not found on a
// "provider/model" name the client chose, reach the client as they came,
// resting nothing.
func TestAClientsNotFoundIsRelayed(t *testing.T) {
	const unknownResponse = `{"error":{"message":"Previous response with id 'resp_1' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`
	for _, c := range []struct {
		name, answer string
		req          errorUnder200Request
		want         string
	}{
		{"an id unknown", unknownResponse, errorUnder200Request{"/v1/responses",
			`{"model":"flaky","input":"hi there","previous_response_id":"resp_1"}`, nil}, "resp_1"},
		{"a file unknown to Anthropic", `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_1"}}`,
			anthropicBody, "file_1"},
		{"a model the client named", openaiModelGone, chatBodyOf("bad-openai/gpt-gone"), "does not exist"},
		// The provider echoes the id the client chose: an id that spells
		// "model … not found" or "page not found" must not let a client
		// rest every deployment of a model for everyone.
		{"an id naming a model", `{"error":{"message":"Previous response with id 'model-1' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`,
			errorUnder200Request{"/v1/responses", `{"model":"flaky","input":"hi there","previous_response_id":"model-1"}`, nil}, "model-1"},
		// A model the client named elsewhere in its request (a tool's):
		// the 404 names that model, not the deployment's (sim-small).
		{"a tool's model", "{\"error\":{\"message\":\"The model `gpt-image-gone` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}",
			errorUnder200Request{"/v1/responses", `{"model":"flaky","input":"draw","tools":[{"type":"image_generation","model":"gpt-image-gone"}]}`, nil}, "gpt-image-gone"},
		{"an id saying page not found", `{"error":{"message":"Previous response with id 'page not found' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`,
			errorUnder200Request{"/v1/responses", `{"model":"flaky","input":"hi there","previous_response_id":"page not found"}`, nil}, "page not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantRelayed404(t, jsonOf(c.answer), c.req, c.want)
		})
	}
}
