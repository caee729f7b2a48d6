package gateway

import "testing"

// TestServerSide: which error objects under a 200 count as the provider's
// failure (failover, cool-down), in each provider's shape.
func TestServerSide(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		// OpenAI and OpenAI-compatible.
		{`{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`, true},
		{`{"error":{"message":"overloaded","type":"server_error"}}`, true},
		{`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, true},
		{`{"error":{"message":"x","code":503}}`, true},
		{`{"error":{"message":"x","code":"429"}}`, false}, // a string that is no word of either list
		{`{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_value"}}`, false},
		{`{"error":{"message":"bad","type":"invalid_request_error","code":"tool_use_failed","status_code":400}}`, false},
		{`{"error":{"message":"bad","type":"server_error","code":400}}`, false}, // a client's code wins
		{`{"error":{"message":"too long","type":"server_error","code":"context_length_exceeded"}}`, false},
		{`{"error":{"message":"no type"}}`, false},
		{`{"error":"overloaded"}`, false},
		// The Responses API's error event.
		{`{"type":"error","code":"server_error","message":"overloaded","param":null}`, true},
		{`{"type":"error","code":"invalid_prompt","message":"no"}`, false},
		{`{"type":"error","sequence_number":2,"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}`, true},
		// Its failed stream: the error is the response's.
		{`{"type":"response.failed","sequence_number":1,"response":{"id":"r","status":"failed","error":{"code":"server_error","message":"failed"}}}`, true},
		{`{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"no"}}}`, false},
		{`{"type":"response.failed","response":{"status":"failed","error":null}}`, false},
		{`{"type":"response.completed","response":{"status":"completed","error":{"code":"server_error"}}}`, false},
		// Anthropic.
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, true},
		{`{"type":"error","error":{"type":"api_error","message":"Internal"}}`, true},
		{`{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`, true},
		{`{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}`, true},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, false},
		{`{"type":"error","error":{"type":"authentication_error","message":"bad key"}}`, false},
		// Gemini, alone or as a one-element array.
		{`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, true},
		{`[{"error":{"code":500,"message":"internal","status":"INTERNAL"}}]`, true},
		{`{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`, false},
		{`{"error":{"code":499,"message":"The operation was cancelled.","status":"CANCELLED"}}`, false},
		// No error object.
		{`{"id":"c","choices":[]}`, false},
		{`{"type":"message_start"}`, false},
		{`not json`, false},
		{``, false},
	} {
		if got := serverSide([]byte(c.body)); got != c.want {
			t.Errorf("serverSide(%s) = %v, want %v", c.body, got, c.want)
		}
	}
}

// TestSaysModelNotFound: which 404 bodies say the model sent is not found
// (the deployment's failure on a model of the table), in each provider's
// shape, and which are the client's own.
func TestSaysModelNotFound(t *testing.T) {
	for _, c := range []struct {
		body  string
		want  bool
		model string // the upstream model the gateway sent
	}{
		{"{\"error\":{\"message\":\"The model `gpt-9` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}", true, "gpt-9"},
		{`{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-opus-20240229"}}`, true, "claude-3-opus-20240229"},
		{`{"error":{"code":404,"message":"models/gemini-1.0-pro is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}`, true, "gemini-1.0-pro"},
		{"{\"object\":\"error\",\"message\":\"The model `llama` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}", true, "llama"}, // vLLM
		{`{"error":"model 'llama3' not found, try pulling it first"}`, true, "llama3"},                                                                     // Ollama
		{`{"error":{"message":"Previous response with id 'resp_1' not found.","type":"invalid_request_error","code":"previous_response_not_found"}}`, false, "x"},
		{`{"type":"error","error":{"type":"not_found_error","message":"File not found: file_1"}}`, false, "x"},
		{`{"error":{"code":404,"message":"CachedContent not found (or permission denied)","status":"NOT_FOUND"}}`, false, "x"},
		// An id the client chose, echoed in the provider's words: its 404
		// is the client's, whatever the id says.
		{`{"error":{"message":"Previous response with id 'model-1' not found.","type":"invalid_request_error","code":"previous_response_not_found"}}`, false, "x"},
		{`{"error":{"message":"Previous response with id 'the model x does not exist' not found.","code":"previous_response_not_found"}}`, false, "x"},
		{`{"detail":"Response model_1 not found"}`, false, "x"},
		{`{"type":"error","error":{"type":"not_found_error","message":"File not found: model: x not found"}}`, false, "x"},
		// A model the client named elsewhere (a tool's), or one that
		// only begins with the deployment's name.
		{"{\"error\":{\"message\":\"The model `gpt-image-gone` does not exist or you do not have access to it.\",\"code\":\"model_not_found\"}}", false, "gpt-4o"},
		{"{\"error\":{\"message\":\"The model `gpt-4o-gone` does not exist or you do not have access to it.\",\"code\":\"model_not_found\"}}", false, "gpt-4o"},
		{`{"error":"model 'llama3:70b' not found, try pulling it first"}`, false, "llama3"},
		{`{"error":"model 'llama3' not found."}`, true, "LLAMA3"},
		{`{"error":{"code":404,"message":"models/gemini-x is not found for API version v1beta","status":"NOT_FOUND"}}`, true, "models/gemini-x"},
		{`<html>404 Not Found</html>`, false, "x"},
		{``, false, "x"},
	} {
		if got := saysModelNotFound([]byte(c.body), c.model); got != c.want {
			t.Errorf("saysModelNotFound(%s, %q) = %v, want %v", c.body, c.model, got, c.want)
		}
	}
}

// TestSaysPathNotFound: which 404 bodies say the path the gateway sent
// is not there (a base_url that is wrong), in each upstream's shape, and
// which name something else that was not found.
func TestSaysPathNotFound(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"error":{"message":"Invalid URL (POST /chat/completions)","type":"invalid_request_error","param":null,"code":null}}`, true},
		{`{"error":{"message":"Unknown request URL: POST /v1/chat/completion. Please check the URL for typos.","type":"invalid_request_error","code":"unknown_url"}}`, true},
		{`{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`, true},
		{`{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`, true},
		{`{"error":{"code":404,"message":"Method not found.","status":"NOT_FOUND"}}`, true}, // Google, a method it lacks
		{`{"detail":"Not Found"}`, true},  // FastAPI
		{`{"error":"Not Found"}`, true},   // an error that is only the status's words
		{`{"message":"Not Found"}`, true}, //
		{"404 page not found\n", true},    // Go's net/http
		{"Not Found", true},
		{"<html><head><title>404 Not Found</title></head></html>", true},
		{"<!DOCTYPE html><html><title>Error 404 (Not Found)!!1</title></html>", true},
		{"", true},
		{"  \n", true},
		{`{}`, true}, // JSON, but no error in it
		{`{"status":404}`, true},
		{`[]`, true},
		{`{"error":{"message":"Previous response with id 'resp_1' not found.","type":"invalid_request_error","code":"previous_response_not_found"}}`, false},
		{`{"type":"error","error":{"type":"not_found_error","message":"File not found: file_1"}}`, false},
		{`{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`, false},
		{`{"error":{"code":404,"message":"CachedContent not found (or permission denied)","status":"NOT_FOUND"}}`, false},
		{`{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}`, false},
		{`{"detail":"Response resp_1 not found"}`, false},
		{`{"error":{"message":"Previous response with id 'page not found' not found.","code":"previous_response_not_found"}}`, false},
		{`{"error":{"message":"Previous response with id 'x page not found' not found.","code":"previous_response_not_found"}}`, false},
		{`{"error":"model 'llama3' not found, try pulling it first"}`, false},
		{`{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","code":404}`, false},
		{`[{"error":{"code":404,"message":"CachedContent not found","status":"NOT_FOUND"}}]`, false},
		{`{"error":{"message":"","code":404}}`, false}, // an error with no words: not the path's, by what it says
	} {
		if got := saysPathNotFound([]byte(c.body)); got != c.want {
			t.Errorf("saysPathNotFound(%s) = %v, want %v", c.body, got, c.want)
		}
	}
}
