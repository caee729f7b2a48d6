package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// Provider is OpenAI and every OpenAI-compatible API, as the gateway
// registers it: chat completions pass through (the gateway's own format),
// authenticated with "Authorization: Bearer"; POST /v1/responses, the
// Responses API, is its native route.
func Provider() provider.Provider {
	return provider.Provider{
		Type:        "openai",
		Auth:        Auth,
		Errors:      Envelope{},
		Embeddings:  Embeddings{},
		Completions: true,
		Routes: []provider.Route{{
			Pattern:     "/v1/responses",
			Read:        readResponses,
			NewTap:      func() provider.StreamTap { return &ResponsesTap{} },
			BodyUsage:   ResponsesBody,
			BilledUsage: ResponsesBilledUsage,
			BilledEnd:   ResponsesBilledEnd,
			// A Response always holds its output items (an array, possibly
			// empty: "Responses", platform.openai.com API reference).
			Answer:     []string{"output"},
			PromptText: ResponsesPrompt,
			Errors:     ResponsesEnvelope{},
			EndEvent:   "response.completed, response.failed or response.incomplete",
		}},
	}
}

// Auth sets "Authorization: Bearer <apiKey>", when there is a key.
func Auth(h http.Header, apiKey string) {
	if apiKey != "" {
		h.Set("Authorization", "Bearer "+apiKey)
	}
}

// StandardTier checks a request's service_tier member, raw (nil when
// absent): only the standard tier is served, asked for as "auto",
// "default", or not at all. OpenAI bills "priority" at about twice the
// standard price and "flex" at about half (OpenAI API reference,
// service_tier; "Priority processing" and "Flex processing" pricing), and
// the price book holds one price per model and token class, so a request
// at another tier would be billed at a price it was not served at. The
// error is fit for a 400 answer.
func StandardTier(raw []byte) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var tier string
	if err := json.Unmarshal(raw, &tier); err != nil {
		return fmt.Errorf("service_tier: must be a string")
	}
	if tier == "auto" || tier == "default" {
		return nil
	}
	return fmt.Errorf("service_tier: %q is not served here: the price book prices the standard tier only "+
		"(send \"auto\", \"default\" or no service_tier), and the provider bills %q at other prices", tier, tier)
}

// TextOnly checks a chat completion request's members (raw values by key)
// for audio, which OpenAI bills at other prices than text: audio output
// ("modalities" with "audio", or an "audio" member) and audio input
// (content parts of type "input_audio") are priced per audio token at
// several times the model's text rates (OpenAI API reference, chat
// completions, modalities and input_audio; pricing, audio tokens), and the
// price book holds one price per model and token class, so such a request
// would be billed at a price it was not served at. The error is fit for a
// 400 answer.
func TextOnly(fields map[string]json.RawMessage) error {
	refuse := func(what string) error {
		return fmt.Errorf("%s: audio is not served here: OpenAI bills audio tokens at other prices than text, "+
			"and the price book prices text only", what)
	}
	// The byte searches pass over most bodies; a value spelling a letter
	// with an escape (\u0061udio) is read whole, as the upstream reads it.
	if raw := fields["modalities"]; len(raw) > 0 && (bytes.Contains(raw, []byte("audio")) || provider.EscapesALetter(raw)) {
		var m []string
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("modalities: must be an array of strings")
		}
		for _, v := range m {
			if v != "text" {
				return refuse(fmt.Sprintf("modalities %q", v))
			}
		}
	}
	if raw := fields["audio"]; len(raw) > 0 && string(raw) != "null" {
		return refuse("audio")
	}
	// A part's type, or its input_audio member's key, is a JSON string
	// ending in input_audio"; a text that holds those bytes has its quote
	// escaped, so a body without audio is read once.
	if msgs := fields["messages"]; bytes.Contains(msgs, []byte(`input_audio"`)) || provider.EscapesALetter(msgs) {
		var ms []struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(msgs, &ms) // checked as an array by the caller; the upstream judges its shape
		for i, m := range ms {
			var parts []struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(m.Content, &parts) != nil {
				continue // a string, or not ours to judge
			}
			for j, p := range parts {
				if p.Type == "input_audio" {
					return refuse(fmt.Sprintf("messages[%d].content[%d] (input_audio)", i, j))
				}
			}
		}
	}
	return nil
}

// readResponses reads a Responses API request: a JSON object with a string
// model and an optional boolean stream. A string safety_identifier, else
// user, names the end user, and metadata tags the request. Background mode
// ("background": true) is refused: the upstream answers at once with a
// queued response without usage and generates afterwards, out of the
// gateway's sight, so the generation would be neither billed nor held by
// the key's spend, token or concurrency limits. So are fallback models
// (provider.CheckOneModel). What an estimate reads of
// the prompt (input, instructions, tools, text: ResponsesPrompt, by
// encoding/json, without regard to case) must be sent once and spelled
// exactly, as the upstream reads it: "input":[a long prompt],"Input":"hi"
// sent the long prompt and had a cut stream billed the estimate of "hi".
func readResponses(_ *http.Request, body []byte) (provider.Call, error) {
	if err := provider.CheckPassedBody(body, "model", "stream", "background", "service_tier",
		"input", "instructions", "tools", "text", "models", "fallbacks"); err != nil {
		return provider.Call{}, err
	}
	var req struct {
		Model      string `json:"model"`
		Stream     bool   `json:"stream"`
		Background bool   `json:"background"`
	}
	var raw struct {
		Model            json.RawMessage `json:"model"`
		ServiceTier      json.RawMessage `json:"service_tier"`
		SafetyIdentifier any             `json:"safety_identifier"`
		User             any             `json:"user"`
		Metadata         json.RawMessage `json:"metadata"`
		Input            json.RawMessage `json:"input"`
		Models           json.RawMessage `json:"models"`
		Fallbacks        json.RawMessage `json:"fallbacks"`
	}
	if err := json.Unmarshal(body, &raw); err == nil && !utf8.Valid(raw.Model) {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			"model: is not valid UTF-8")
	}
	if len(raw.Input) > 0 {
		// The estimate reads each input item and content part by
		// encoding/json too (ResponsesPrompt). Maps of the client's or a
		// tool's own (a local shell call's env, where http_proxy and
		// HTTP_PROXY may both be; an MCP tool's input_schema; a file
		// search result's attributes; metadata) are not looked into.
		if err := provider.CheckFoldedKeys("input", raw.Input, "env", "input_schema", "attributes", "metadata"); err != nil {
			return provider.Call{}, err
		}
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			"the request body must be a JSON object with a string model and a boolean stream")
	}
	if err := StandardTier(raw.ServiceTier); err != nil {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
	}
	if err := provider.CheckOneModel("models", raw.Models); err != nil {
		return provider.Call{}, err
	}
	if err := provider.CheckOneModel("fallbacks", raw.Fallbacks); err != nil {
		return provider.Call{}, err
	}
	if req.Background {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			"background responses are not served here: their generation runs after the answer, where it could not be metered")
	}
	endUser, _ := raw.SafetyIdentifier.(string)
	if endUser == "" {
		endUser, _ = raw.User.(string)
	}
	return provider.Call{Model: req.Model, Stream: req.Stream, SSE: req.Stream, Endpoint: "/v1/responses",
		EndUser: endUser, Metadata: raw.Metadata,
		Upstream: func(model string) (string, []byte, error) {
			b, err := provider.SetMember(body, "model", AppendString(nil, model))
			return "/responses", b, err
		}}, nil
}

// ResponsesPrompt is the prompt of a Responses API request that reaches
// the model, for an estimate: the text of its instructions; of its input,
// a string or items whose content (or a function call's output) is a
// string or has text parts, with function calls' names and arguments; and
// of its tools and text format (a JSON schema), as they are written; and
// its input_image parts, counted as a chat request's image_url parts are
// (ImageTokens). An image counted 0, so a response cut short with no usage
// report was billed its text alone.
func ResponsesPrompt(body []byte) tap.Prompt {
	var req struct {
		Instructions json.RawMessage `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        json.RawMessage `json:"tools"`
		Text         json.RawMessage `json:"text"` // its format's JSON schema
	}
	_ = json.Unmarshal(body, &req)
	var b strings.Builder
	var media int64
	add := func(s string) {
		if s != "" {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	var text string
	if json.Unmarshal(req.Instructions, &text) == nil {
		add(text)
	}
	if json.Unmarshal(req.Input, &text) == nil {
		add(text)
	}
	var items []struct {
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"` // a function call's output
	}
	_ = json.Unmarshal(req.Input, &items)
	for _, it := range items {
		add(it.Name)
		add(it.Arguments)
		for _, raw := range [2]json.RawMessage{it.Content, it.Output} {
			if json.Unmarshal(raw, &text) == nil {
				add(text)
				continue
			}
			var parts []struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(raw, &parts)
			for _, p := range parts {
				add(p.Text)
				if p.Type == "input_image" {
					media += ImageTokens(p.Detail)
				}
			}
		}
	}
	for _, d := range [2]json.RawMessage{req.Tools, req.Text} {
		if len(d) > 0 && string(d) != "null" {
			add(string(d)) // definitions reach the model as text
		}
	}
	return tap.Prompt{Text: b.String(), Media: media}
}

// ImageTokens is what an estimate counts for an image part of a request
// (a chat message's image_url, a Responses input_image), whose size it
// does not read: OpenAI's count for a 1024×1024 image, 85 tokens and 170
// for each of its four 512-pixel tiles (765), or 85 at detail "low"
// (OpenAI docs, "Images and vision", calculating costs). An image counted
// 0, so a request cut short with no usage report was billed its text
// alone.
func ImageTokens(detail string) int64 {
	if detail == "low" {
		return 85
	}
	return 765
}

// Envelope is OpenAI's error envelope:
// {"error":{"message","type","param","code"}}; mid-stream, a data frame
// of it followed by data: [DONE], as chat completion streams end.
type Envelope struct{}

// WriteError answers with e in OpenAI's envelope.
func (Envelope) WriteError(w http.ResponseWriter, e provider.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(ErrorPayload(e.Type, e.Code, e.Message), '\n'))
}

// StreamError is data: {"error":...} then data: [DONE].
func (Envelope) StreamError(e provider.Error) []byte {
	b := append([]byte("data: "), ErrorPayload(e.Type, e.Code, e.Message)...)
	return append(b, "\n\ndata: [DONE]\n\n"...)
}

// ErrorPayload is an OpenAI error object's JSON: {"error":{...}}, with a
// null param, and a null code when code is empty.
func ErrorPayload(typ, code, msg string) []byte {
	b := []byte(`{"error":{"message":`)
	b = AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = AppendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, code)
	}
	return append(b, "}}"...)
}

// ResponsesEnvelope is OpenAI's envelope on the Responses API: errors as
// OpenAI's, and mid-stream an "error" event
// ({"type":"error","code","message","param"}), the Responses API's own.
type ResponsesEnvelope struct{ Envelope }

// StreamError is event: error with the Responses API's error event.
func (ResponsesEnvelope) StreamError(e provider.Error) []byte {
	b := []byte("event: error\ndata: {\"type\":\"error\",\"code\":")
	b = AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = AppendString(b, e.Message)
	return append(b, ",\"param\":null}\n\n"...)
}
