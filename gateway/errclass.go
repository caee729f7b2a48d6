package gateway

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/sse"
)

// An upstream may answer 200 and still refuse the request: its body an
// error object, or its stream's first event an error frame. Before the
// client has a byte of it, such an answer is a failure of the deployment,
// as a 5xx is (failover, cool-down: see exchange.errorUnder200), when the
// error says it is the provider's side that failed. It is read from the
// error object's own words, conservatively: a client's request that the
// provider refuses (a bad field, too long a prompt, a policy) would fail
// on every deployment, and a client that could send such requests must not
// be able to cool down every deployment of a model.

// serverSide reports whether b, an upstream's error object (a whole body
// or an event's data, as the provider sent it), names a failure of the
// provider's side: its type, code or status (the error's own, or
// Anthropic's and the Responses API's event around it) is one of
// serverErrorWords, or a numeric code or status_code is 429 or 5xx; and
// none of them names the client's side (clientErrorWords, or another 4xx).
// An error that names neither (no type, an unknown one) is not taken as
// the deployment's failure: it reaches the client as it did before.
// Shapes read: OpenAI's {"error":{"type","code"}} (and OpenAI-compatible
// ones' "status_code"), the Responses API's {"type":"error","code"},
// Anthropic's {"type":"error","error":{"type"}}, Gemini's
// {"error":{"code","status"}}, alone or as the only element of an array,
// and the Responses API's {"type":"response.failed","response":{"error"}}.
func serverSide(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) != nil || len(arr) != 1 {
			return false
		}
		b = arr[0]
	}
	var top struct {
		Type     json.RawMessage `json:"type"`
		Code     json.RawMessage `json:"code"`
		Error    json.RawMessage `json:"error"`
		Response struct {
			Error json.RawMessage `json:"error"`
		} `json:"response"`
	}
	if json.Unmarshal(b, &top) != nil {
		return false
	}
	if t, _ := jsonText(top.Type); t == "response.failed" && len(top.Error) == 0 {
		top.Error = top.Response.Error // the Responses API's failed stream: its error is the response's
	}
	var inner struct {
		Type       json.RawMessage `json:"type"`
		Code       json.RawMessage `json:"code"`
		Status     json.RawMessage `json:"status"`
		StatusCode json.RawMessage `json:"status_code"`
	}
	e := bytes.TrimSpace(top.Error)
	hasInner := len(e) > 0 && e[0] == '{' && json.Unmarshal(e, &inner) == nil
	topType, _ := jsonText(top.Type)
	if !hasInner && topType != "error" {
		return false // no error object: not an error under a 200 this reads
	}
	server, client := false, false
	judge := func(raw json.RawMessage) {
		if s, ok := jsonText(raw); ok {
			switch w := strings.ToLower(s); {
			case clientErrorWords[w]:
				client = true
			case serverErrorWords[w]:
				server = true
			}
			return
		}
		var n float64
		if json.Unmarshal(raw, &n) != nil {
			return
		}
		switch {
		case n == 429 || n >= 500 && n <= 599:
			server = true
		case n >= 400 && n <= 499:
			client = true
		}
	}
	if topType == "error" {
		judge(top.Code) // the Responses API's error event
	}
	if hasInner {
		judge(inner.Type)
		judge(inner.Code)
		judge(inner.Status)
		judge(inner.StatusCode)
	}
	return server && !client
}

// eventError is what serverSide reads of a stream event: its data, or,
// when it has none, its other lines (a raw JSON error body in the stream).
func eventError(ev *sse.Event) []byte {
	if ev.HasData {
		return ev.Data
	}
	return ev.Other
}

// jsonText reads a JSON string; false for anything else.
func jsonText(raw json.RawMessage) (string, bool) {
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// serverErrorWords are the error types, codes and statuses (lower-cased)
// that name a failure of the provider's side: OpenAI's server_error,
// rate_limit_exceeded and insufficient_quota (the provider's account, not
// the client's, answered with a 429 when it comes as a status); Anthropic's
// api_error, overloaded_error, rate_limit_error, timeout_error and
// billing_error (the operator's account, as insufficient_quota is: see
// docs.anthropic.com/en/api/errors); Gemini's UNAVAILABLE,
// INTERNAL, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED; and a few common
// spellings of the same among OpenAI-compatible servers.
var serverErrorWords = map[string]bool{
	"server_error": true, "api_error": true, "overloaded_error": true, "overloaded": true,
	"rate_limit_error": true, "rate_limit_exceeded": true, "insufficient_quota": true,
	"timeout_error": true, "billing_error": true,
	"internal_error": true, "internal_server_error": true, "service_unavailable": true,
	"unavailable": true, "internal": true, "resource_exhausted": true, "deadline_exceeded": true,
}

// clientErrorWords are the error types, codes and statuses (lower-cased)
// that name the client's side: the request as sent, its key, or its
// content. One of them keeps an error from counting as the deployment's
// failure whatever else it says.
var clientErrorWords = map[string]bool{
	"invalid_request_error": true, "invalid_request": true, "authentication_error": true,
	"permission_error": true, "not_found_error": true, "request_too_large": true,
	"invalid_argument": true, "failed_precondition": true, "permission_denied": true,
	"unauthenticated": true, "not_found": true, "out_of_range": true, "cancelled": true,
	"context_length_exceeded": true, "content_filter": true, "content_policy_violation": true,
	"invalid_api_key": true, "model_not_found": true, "invalid_prompt": true,
}

// keyRefusal reports whether b, the body of an upstream's 400, is Google's
// refusal of the API key the gateway sent (the deployment's own): Gemini
// answers an invalid or expired key with 400 INVALID_ARGUMENT, not 401,
// its error's details naming the reason in an ErrorInfo
// ({"error":{"details":[{"reason":"API_KEY_INVALID"}]}}). Any other 400 is
// the client's request.
func keyRefusal(b []byte) bool {
	var body struct {
		Error struct {
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) != nil {
		return false
	}
	for _, d := range body.Error.Details {
		if d.Reason == "API_KEY_INVALID" || d.Reason == "API_KEY_EXPIRED" {
			return true
		}
	}
	return false
}

// saysModelNotFound reports whether b, the body of an upstream's 404, says
// that the model it was sent is not found: OpenAI's code model_not_found
// ("The model `x` does not exist or you do not have access to it."),
// Anthropic's not_found_error whose message is "model: x", Gemini's
// NOT_FOUND "models/x is not found for API version v1beta, …", and
// OpenAI-compatible servers' like messages (vLLM's "The model `x` does not
// exist.", Ollama's {"error":"model 'x' not found"}): its code, or a
// message that begins by naming a model and then says it is not found or
// does not exist; and either way its message names model, the upstream
// model the gateway sent (namesModel). Any other 404 (an id the client
// sent that the provider does not know: a previous_response_id, a file, a
// cached content; a model the client named elsewhere in its request, a
// tool's) is not.
func saysModelNotFound(b []byte, model string) bool {
	msg, code, _ := errorWords(b)
	if !namesModel(msg, model) {
		return false
	}
	if strings.EqualFold(code, "model_not_found") {
		return true
	}
	// Every rule is anchored at the message's start: providers echo ids
	// the client chose inside their messages ("Previous response with id
	// 'model-1' not found."), and a match anywhere in it would let a
	// client rest every deployment of a model for every customer.
	msg = strings.TrimSpace(strings.ToLower(msg))
	if strings.HasPrefix(msg, "model:") || strings.HasPrefix(msg, "models/") && strings.Contains(msg, "not found") {
		return true
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(msg, "the "), "model ")
	return ok && (strings.Contains(rest, "not found") || strings.Contains(rest, "does not exist"))
}

// namesModel reports whether msg names model (in any case) as a name of
// its own: not inside a longer one ("gpt-4o" is not named by
// "gpt-4o-mini" nor by "ft:gpt-4o:org"), "models/" before it allowed.
func namesModel(msg, model string) bool {
	if model == "" {
		return false
	}
	msg, model = strings.ToLower(msg), strings.ToLower(strings.TrimPrefix(model, "models/"))
	inName := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:@", c) >= 0
	}
	for from := 0; ; {
		i := strings.Index(msg[from:], model)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(model)
		if (i == 0 || !inName(msg[i-1])) && (end == len(msg) || !inName(msg[end]) || msg[end] == '.' && (end+1 == len(msg) || msg[end+1] == ' ')) {
			return true
		}
		from = i + 1
	}
}

// saysPathNotFound reports whether b, the body of an upstream's 404, says
// that the path it was sent is not there (a base_url without its /v1, a
// typo, a proxy's root): b is no error object an API answers with (a web
// page, text such as Go's "404 page not found", nothing, JSON with no
// error in it), or its error's message says so: OpenAI's "Invalid URL
// (POST /chat/completions)" (and its older "Unknown request URL: …"),
// Google's "Method not found.", a "page not found", or no more than the
// status's words ("Not Found": Anthropic's not_found_error for a path it
// does not serve, FastAPI's {"detail":"Not Found"}). An error that names
// what was not found (an id the client sent, a model) is not; nor is one
// with no message.
func saysPathNotFound(b []byte) bool {
	msg, _, found := errorWords(b)
	if !found {
		return true // no JSON, or JSON with no error in it: not an API's error object
	}
	msg = strings.TrimRight(strings.ToLower(strings.TrimSpace(msg)), ".")
	switch msg {
	case "not found", "404 not found", "404: not found", "404 page not found":
		return true
	}
	// Anchored at the start, as saysModelNotFound's rules are: a message
	// that echoes a client's id ("… id 'page not found' not found") is
	// the client's.
	page := strings.TrimLeft(strings.TrimPrefix(msg, "404"), " :-")
	return strings.HasPrefix(msg, "invalid url") || strings.HasPrefix(msg, "unknown request url") ||
		strings.HasPrefix(msg, "method not found") || strings.HasPrefix(page, "page not found")
}

// errorWords reads the message and code of b, an upstream's error body:
// its "error" object's (OpenAI, Anthropic, Gemini), or its "error" string
// (Ollama's) with its own "code", else its own "message" and "code", else
// FastAPI's "detail"; a Gemini stream's one-element array is read inside.
// found is false when b is no JSON object, or one with none of these.
func errorWords(b []byte) (msg, code string, found bool) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' { // Gemini's streams put their error in an array
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) == 1 {
			b = bytes.TrimSpace(arr[0])
		}
	}
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Code    json.RawMessage `json:"code"`
		Detail  json.RawMessage `json:"detail"` // FastAPI's
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &body) != nil {
		return "", "", false
	}
	code, _ = jsonText(body.Code)
	switch e := bytes.TrimSpace(body.Error); {
	case len(e) > 0 && e[0] == '{':
		var inner struct {
			Message json.RawMessage `json:"message"`
			Code    json.RawMessage `json:"code"`
		}
		_ = json.Unmarshal(e, &inner)
		msg, _ = jsonText(inner.Message)
		code, _ = jsonText(inner.Code)
	case len(e) > 0 && e[0] == '"':
		msg, _ = jsonText(e)
	case len(body.Message) > 0:
		msg, _ = jsonText(body.Message)
	case len(body.Detail) > 0:
		msg, _ = jsonText(body.Detail)
	default:
		return "", code, false
	}
	return msg, code, true
}
