package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// Provider is Anthropic's Messages API, as the gateway registers it:
// chat completions translated (Chat), its own POST /anthropic/v1/messages
// passed through, the upstream authenticated with x-api-key and
// anthropic-version, and its clients' keys read from x-api-key.
func Provider() provider.Provider {
	return provider.Provider{
		Type:      "anthropic",
		Auth:      Auth,
		ClientKey: func(r *http.Request) string { return r.Header.Get("X-Api-Key") },
		Chat:      Chat{},
		Errors:    Envelope{},
		Counters: []provider.Counter{{
			Pattern: "/anthropic/v1/messages/count_tokens",
			Read:    readCountTokens,
		}},
		Routes: []provider.Route{{
			Pattern:     "/anthropic/v1/messages",
			Read:        readMessages,
			NewTap:      func() provider.StreamTap { return &Tap{} },
			BodyUsage:   BodyUsage,
			BilledUsage: BilledUsage,
			// A Message always holds its content blocks ("Messages",
			// docs.anthropic.com: content, possibly empty).
			Answer:     []string{"content"},
			PromptText: Prompt,
			// Anthropic ends every stream with message_stop ("Streaming
			// Messages", docs.anthropic.com: message_start, content
			// blocks, one or more message_delta, then message_stop).
			EndEvent: "message_stop",
		}},
	}
}

// Auth sets Anthropic's authentication (x-api-key), anthropic-version and
// the JSON content type.
func Auth(h http.Header, apiKey string) {
	h.Set("x-api-key", apiKey)
	h.Set("anthropic-version", APIVersion)
	h.Set("content-type", "application/json")
}

var (
	_ provider.Chat        = Chat{}
	_ provider.StreamTap   = (*Tap)(nil)
	_ provider.ChunkStream = (*Stream)(nil)
)

// readCountTokens reads POST /anthropic/v1/messages/count_tokens: a
// Messages request without max_tokens, passed through to the upstream's
// /messages/count_tokens with its model replaced (Anthropic API
// reference, "Count Message tokens").
func readCountTokens(r *http.Request, body []byte) (provider.Call, error) {
	call, err := readRequest(r, body, false) // counting is free: no pricing option to refuse
	if err != nil {
		return call, err
	}
	call.Endpoint = "/anthropic/v1/messages/count_tokens"
	up := call.Upstream
	call.Upstream = func(model string) (string, []byte, error) {
		_, b, err := up(model)
		return "/messages/count_tokens", b, err
	}
	return call, nil
}

// readMessages reads a Messages request: a JSON object with a string model
// and an optional boolean stream. The client's anthropic-version and
// anthropic-beta headers go upstream with it; a string metadata.user_id
// names the end user.
func readMessages(r *http.Request, body []byte) (provider.Call, error) {
	return readRequest(r, body, true)
}

// readRequest is readMessages, which refuses options Anthropic bills at
// other rates (standardPricing), server-side fallback models
// (provider.CheckOneModel) and tools that run a model of their own
// (modelTool), when priced. What an estimate reads of the
// prompt (messages, system, tools: PromptText, by encoding/json, without
// regard to case) must be sent once and spelled exactly, as Anthropic reads
// it: "messages":[a long prompt],"Messages":[hi] sent the long prompt and
// had a cut stream billed the estimate of "hi".
func readRequest(r *http.Request, body []byte, priced bool) (provider.Call, error) {
	if err := provider.CheckPassedBody(body, "model", "stream", "speed", "inference_geo",
		"messages", "system", "tools", "fallbacks", "cache_control"); err != nil {
		return provider.Call{}, err
	}
	if priced {
		if err := standardPricing(r.Header, body); err != nil {
			return provider.Call{}, err
		}
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	var raw struct {
		Model     json.RawMessage `json:"model"`
		Metadata  json.RawMessage `json:"metadata"`
		Messages  json.RawMessage `json:"messages"`
		System    json.RawMessage `json:"system"`
		Tools     json.RawMessage `json:"tools"`
		Fallbacks json.RawMessage `json:"fallbacks"`
		Cache     json.RawMessage `json:"cache_control"`
	}
	if err := json.Unmarshal(body, &raw); err == nil && !utf8.Valid(raw.Model) {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			"model: is not valid UTF-8")
	}
	if priced {
		// Server-side fallback would serve (and have Anthropic bill)
		// another model than the one routed, allowed and priced.
		if err := provider.CheckOneModel("fallbacks", raw.Fallbacks); err != nil {
			return provider.Call{}, err
		}
	}
	// The estimate reads each message and block by encoding/json too
	// (PromptText); a tool_use block's input is the tool's own JSON,
	// counted as written. So are the tools, whose type, model and
	// cache_control the checks here read by encoding/json (a tool's
	// input_schema and input_examples are the client's own JSON, an MCP
	// toolset's configs are keyed by its tools' names), and the top-level
	// cache_control (automatic caching), whose ttl cacheTTL reads: a
	// "ttl":"1h","ttl":"5m" passed as the 5-minute cache.
	for _, m := range []struct {
		name   string
		v      json.RawMessage
		opaque []string
	}{{"messages", raw.Messages, []string{"input"}}, {"system", raw.System, []string{"input"}},
		{"tools", raw.Tools, []string{"input_schema", "input_examples", "configs"}}, {"cache_control", raw.Cache, nil}} {
		if len(m.v) > 0 {
			if err := provider.CheckFoldedKeys(m.name, m.v, m.opaque...); err != nil {
				return provider.Call{}, err
			}
		}
	}
	if priced {
		if what, ok := modelTool(raw.Tools); ok {
			return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
				what+": a tool that runs a model of its own is not served here: Anthropic bills that model's tokens at its rates, "+
					"within this request's usage, and the gateway neither routed it, checked it against the key's allowed_models, nor prices it")
		}
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			"the request body must be a JSON object with a string model")
	}
	h := http.Header{}
	for _, k := range []string{"anthropic-version", "anthropic-beta"} {
		if v := r.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	var meta struct {
		UserID any `json:"user_id"`
	}
	_ = json.Unmarshal(raw.Metadata, &meta) // not ours to refuse: the upstream judges it
	endUser, _ := meta.UserID.(string)
	return provider.Call{Model: req.Model, Stream: req.Stream, SSE: req.Stream, Endpoint: "/anthropic/v1/messages", Header: h,
		EndUser: endUser,
		Upstream: func(model string) (string, []byte, error) {
			b, err := provider.SetMember(body, "model", openai.AppendString(nil, model))
			return "/messages", b, err
		}}, nil
}

// modelTool finds a tool in tools (a Messages request's tools array) that
// runs a model of its own within the request: the advisor tool
// ({"type":"advisor_20260301","model":…}, beta advisor-tool-2026-03-01),
// whose consultations Anthropic bills at the advisor model's rates and
// reports among usage.iterations[] (which the tap sums, as the model
// routed), or any tool naming a model. It returns which, and true.
// Keys are read exactly, once each (the caller refused folded spellings).
func modelTool(tools json.RawMessage) (string, bool) {
	var ts []map[string]json.RawMessage
	if json.Unmarshal(tools, &ts) != nil {
		return "", false // not an array of objects: the upstream's to refuse
	}
	for i, t := range ts {
		var typ string
		_ = json.Unmarshal(t["type"], &typ)
		if strings.HasPrefix(strings.ToLower(typ), "advisor") {
			return fmt.Sprintf("tools[%d] (%s)", i, typ), true
		}
		if m := bytes.TrimSpace(t["model"]); len(m) > 0 && string(m) != "null" {
			return fmt.Sprintf("tools[%d].model", i), true
		}
	}
	return "", false
}

// standardPricing refuses (400) a Messages request that Anthropic bills at
// other rates than the standard ones, since the price book holds one price
// per model and token class and it would be billed at a price it was not
// served at (as the OpenAI routes refuse service_tier "priority" and
// "flex"):
//   - speed other than "standard": fast mode, at a multiple of the
//     standard rates (Anthropic docs, "Fast mode", pricing);
//   - inference_geo other than "global": inference kept in one geography,
//     at a premium (Anthropic docs, "Data residency");
//   - an anthropic-beta flag context-1m-…: prompts over 200K tokens at the
//     long-context rates (Anthropic docs, "Context windows" and pricing);
//   - a cache_control whose ttl is other than "5m": the 1-hour cache,
//     whose writes cost twice the input price against 1.25 times for the
//     5-minute cache the price book's cache_write price is (Anthropic docs,
//     "Prompt caching", "1-hour cache duration"; the usage then splits
//     cache_creation into ephemeral_5m_input_tokens and
//     ephemeral_1h_input_tokens).
func standardPricing(h http.Header, body []byte) error {
	refuse := func(what, why, instead string) error {
		return provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			what+" is not served here: Anthropic bills "+why+" at other rates than the standard ones, the only ones the price book holds ("+instead+")")
	}
	for _, v := range h.Values("anthropic-beta") {
		for flag := range strings.SplitSeq(v, ",") {
			if f := strings.ToLower(strings.TrimSpace(flag)); strings.HasPrefix(f, "context-1m") {
				return refuse("anthropic-beta: "+strings.TrimSpace(flag), "prompts over 200K tokens", "leave the flag out")
			}
		}
	}
	var opts struct {
		Speed        json.RawMessage `json:"speed"`
		InferenceGeo json.RawMessage `json:"inference_geo"`
	}
	_ = json.Unmarshal(body, &opts) // read as a JSON object by the caller
	for _, o := range []struct {
		name, standard, why string
		raw                 json.RawMessage
	}{{"speed", "standard", "fast mode", opts.Speed}, {"inference_geo", "global", "inference in one geography", opts.InferenceGeo}} {
		if len(o.raw) == 0 || string(o.raw) == "null" {
			continue
		}
		var v string
		if err := json.Unmarshal(o.raw, &v); err != nil {
			return provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request", o.name+": must be a string")
		}
		if v != o.standard {
			return refuse(fmt.Sprintf("%s %q", o.name, v), o.why, fmt.Sprintf("send %q or leave it out", o.standard))
		}
	}
	if ttl, ok := cacheTTL(body); !ok {
		return refuse(fmt.Sprintf("cache_control ttl %s", ttl), "1-hour cache writes", `send "5m" or leave ttl out`)
	}
	return nil
}

// cacheTTL finds a cache_control object anywhere in body whose ttl is other
// than "5m" (or null), and returns it with false. The body is decoded only
// when a byte search could find one: it holds the key "ttl" (quoted, so
// that "little" in a prompt does not count), or an escape that could spell
// it.
func cacheTTL(body []byte) (ttl string, ok bool) {
	if !bytes.Contains(body, []byte(`"ttl"`)) && !provider.EscapesALetter(body) {
		return "", true
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // a number beyond float64 (1e400) must not stop the search: encoding/json's struct reads skip it
	var v any
	if d.Decode(&v) != nil {
		return "", true // not ours to refuse: the caller reads it as a JSON object
	}
	var walk func(v any) (string, bool)
	walk = func(v any) (string, bool) {
		switch v := v.(type) {
		case map[string]any:
			if cc, isObj := v["cache_control"].(map[string]any); isObj {
				if t, has := cc["ttl"]; has && t != nil && t != "5m" {
					b, _ := json.Marshal(t)
					return string(b), false
				}
			}
			for k, e := range v {
				if k == "input" || k == "input_schema" {
					continue // a tool call's arguments, a tool's schema: the client's own JSON
				}
				if t, ok := walk(e); !ok {
					return t, false
				}
			}
		case []any:
			for _, e := range v {
				if t, ok := walk(e); !ok {
					return t, false
				}
			}
		}
		return "", true
	}
	return walk(v)
}

// KeyHint says how Anthropic's SDKs send the key (provider.KeyHinter).
func (Envelope) KeyHint() string {
	return "send your Tollgate key in the x-api-key header (as Anthropic's SDKs do with api_key), or as Authorization: Bearer <key>"
}

var _ provider.KeyHinter = Envelope{}

// Envelope is the Messages API's error envelope:
// {"type":"error","error":{"type","message"}}, with Anthropic's error type
// for the status (Anthropic API reference, "Errors"); mid-stream, an
// "error" event of the same object.
type Envelope struct{}

// WriteError answers with e in Anthropic's envelope.
func (Envelope) WriteError(w http.ResponseWriter, e provider.Error) {
	provider.WriteJSONError(w, e.Status, errorObject(e))
}

// StreamError is event: error with Anthropic's error object.
func (Envelope) StreamError(e provider.Error) []byte {
	b := append([]byte("event: error\ndata: "), errorObject(e)...)
	return append(b, "\n\n"...)
}

func errorObject(e provider.Error) []byte {
	b := []byte(`{"type":"error","error":{"type":`)
	b = openai.AppendString(b, ErrorType(e.Status))
	b = append(b, `,"message":`...)
	b = openai.AppendString(b, e.Message)
	return append(b, "}}"...)
}

// ErrorType is Anthropic's error type for an HTTP status (Anthropic API
// reference, "Errors": HTTP errors).
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529, http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}
