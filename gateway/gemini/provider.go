package gemini

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// Provider is the Gemini API, as the gateway registers it: chat
// completions translated (Chat), its own
// POST /gemini/v1beta/models/{model}:streamGenerateContent and
// :generateContent passed through, the upstream authenticated with
// x-goog-api-key, and its clients' keys read from x-goog-api-key or ?key=.
func Provider() provider.Provider {
	return provider.Provider{
		Type: "gemini",
		Auth: Auth,
		ClientKey: func(r *http.Request) string {
			if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
				return k
			}
			return r.URL.Query().Get("key")
		},
		Chat:       Chat{},
		Errors:     Envelope{},
		Embeddings: Embeddings{},
		Counters: []provider.Counter{{
			Match: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ":countTokens") },
			Read:  readCountTokens,
		}},
		Routes: []provider.Route{generateRoute("/gemini/v1beta/*"), generateRoute("/gemini/v1/*")},
	}
}

// generateRoute is generateContent and streamGenerateContent under
// pattern: the API's v1beta and its v1 (google.golang.org/genai's default
// version since v1.79), both sent to the provider's base_url, whose own
// version is the one the upstream serves.
func generateRoute(pattern string) provider.Route {
	return provider.Route{
		Pattern:     pattern,
		Read:        readGenerate,
		NewTap:      func() provider.StreamTap { return &Tap{} },
		BodyUsage:   BodyUsage,
		BilledUsage: BilledUsage,
		// A GenerateContentResponse holds its candidates, or its
		// promptFeedback when the prompt was blocked (Gemini API
		// reference, "Generating content").
		Answer:     []string{"candidates", "promptFeedback", "prompt_feedback"},
		PromptText: Prompt,
	}
}

// Auth sets Gemini's API key header (x-goog-api-key) and the JSON content
// type. An empty apiKey sets no key header.
func Auth(h http.Header, apiKey string) {
	if apiKey != "" {
		h.Set("x-goog-api-key", apiKey)
	}
	h.Set("Content-Type", "application/json")
}

var (
	_ provider.Chat        = Chat{}
	_ provider.StreamTap   = (*Tap)(nil)
	_ provider.ChunkStream = (*Stream)(nil)
)

// versionPrefix is the route prefix of path: "/gemini/v1beta/", or
// "/gemini/v1/".
func versionPrefix(path string) string {
	if strings.HasPrefix(path, "/gemini/v1/") {
		return "/gemini/v1/"
	}
	return "/gemini/v1beta/"
}

// readGenerate reads a generateContent or streamGenerateContent request:
// the model and method from the path, a JSON body. streamGenerateContent
// without alt=sse answers one JSON array, relayed as a whole body.
func readGenerate(r *http.Request, body []byte) (provider.Call, error) {
	prefix := versionPrefix(r.URL.EscapedPath())
	model, method, ok := ModelFromPath(strings.TrimPrefix(r.URL.EscapedPath(), prefix))
	if !ok {
		return provider.Call{}, pathNotFound(r, prefix+"models/{model}:streamGenerateContent, :generateContent or :countTokens")
	}
	if !json.Valid(body) {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			"the request body is not valid JSON")
	}
	// What an estimate reads of the prompt (Prompt, by encoding/json,
	// without regard to case) must be sent once and spelled exactly, as
	// Gemini reads it: "contents":[a long prompt],"Contents":[hi] sent the
	// long prompt and had a cut stream billed the estimate of "hi".
	if err := provider.CheckPassedBody(body, "contents", "systemInstruction", "system_instruction", "tools"); err != nil {
		return provider.Call{}, err
	}
	// So must each content and part's (a functionCall's args and a
	// functionResponse's response are the tool's own JSON, counted as
	// written).
	var prompt struct {
		Contents json.RawMessage `json:"contents"`
		System   json.RawMessage `json:"systemInstruction"`
		SystemP  json.RawMessage `json:"system_instruction"`
	}
	_ = json.Unmarshal(body, &prompt) // valid JSON; another shape is the upstream's to refuse
	for _, m := range []struct {
		name string
		v    json.RawMessage
	}{{"contents", prompt.Contents}, {"systemInstruction", prompt.System}, {"system_instruction", prompt.SystemP}} {
		if len(m.v) > 0 {
			if err := provider.CheckFoldedKeys(m.name, m.v, "args", "response"); err != nil {
				return provider.Call{}, err
			}
		}
	}
	stream := method == "streamGenerateContent"
	alt := r.URL.Query().Get("alt")
	// alt is Google's response format for every REST API (json, sse, media,
	// proto); the gateway meters JSON bodies and SSE streams only, so it
	// refuses a format whose usage it could not read.
	if !(alt == "" || alt == "json" || alt == "sse" && stream) {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			fmt.Sprintf("alt=%q is not served here: use alt=json (the default), or alt=sse with streamGenerateContent", alt))
	}
	return provider.Call{Model: model, Stream: stream, SSE: stream && alt == "sse",
		Endpoint: prefix + "models/{model}:" + method,
		Upstream: func(upstream string) (string, []byte, error) {
			path := modelPath(upstream) + ":" + method
			if alt != "" {
				path += "?" + url.Values{"alt": {alt}}.Encode()
			}
			return path, body, nil
		}}, nil
}

// KeyHint says how Gemini's SDKs send the key (provider.KeyHinter).
func (Envelope) KeyHint() string {
	return "send your Tollgate key in the x-goog-api-key header (as Google's genai SDKs do with api_key), as ?key=, or as Authorization: Bearer <key>"
}

var _ provider.KeyHinter = Envelope{}

// Envelope is the Gemini API's error envelope:
// {"error":{"code","message","status"}}, status being Google's canonical
// code for the HTTP status (google.rpc.Code); mid-stream, a data frame of it.
type Envelope struct{}

// WriteError answers with e in Gemini's envelope.
func (Envelope) WriteError(w http.ResponseWriter, e provider.Error) {
	provider.WriteJSONError(w, e.Status, errorObject(e))
}

// StreamError is a data frame of Gemini's error object.
func (Envelope) StreamError(e provider.Error) []byte {
	b := append([]byte("data: "), errorObject(e)...)
	return append(b, "\r\n\r\n"...)
}

func errorObject(e provider.Error) []byte {
	b := []byte(`{"error":{"code":`)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"message":`...)
	b = openai.AppendString(b, e.Message)
	b = append(b, `,"status":`...)
	b = openai.AppendString(b, Status(e.Status))
	return append(b, "}}"...)
}

// Status is Google's canonical error code name for an HTTP status, as the
// Gemini API sends it in error.status (google.rpc.Code's HTTP mapping).
func Status(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusPaymentRequired:
		return "FAILED_PRECONDITION"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status < 500 {
		return "INVALID_ARGUMENT"
	}
	return "INTERNAL"
}

// pathNotFound is the 404 of a native path that names no model and method
// the gateway serves (want: the paths it does serve). A model holding a
// colon (sent escaped, "%3A") is named as the reason: the colon separates
// the method, and such a model would put two methods in the upstream's path.
func pathNotFound(r *http.Request, want string) error {
	msg := "expected " + want
	if p, err := url.PathUnescape(r.URL.EscapedPath()); err == nil && strings.Count(p, ":") > 1 {
		msg = "a model name may not hold a colon (%3A), which separates the method; " + msg
	}
	return provider.Err(http.StatusNotFound, "invalid_request_error", "not_found", msg)
}
