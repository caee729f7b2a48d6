package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// chatRequest is a client's chat completion request: the fields the gateway
// acts on, and every field as sent, which go upstream unchanged but for model
// and stream_options.
type chatRequest struct {
	fields       map[string]json.RawMessage
	model        string
	stream       bool
	includeUsage bool
}

// parseChatRequest checks the fields the gateway relies on; its errors name
// the field and are fit for a 400 response.
func parseChatRequest(body []byte) (*chatRequest, error) {
	r, err := parseOpenAIRequest(body)
	if err != nil {
		return nil, err
	}
	if msgs := bytes.TrimSpace(r.fields["messages"]); len(msgs) == 0 || msgs[0] != '[' {
		return nil, fmt.Errorf("messages: must be an array of messages")
	}
	if err := openai.TextOnly(r.fields); err != nil {
		return nil, err
	}
	return r, nil
}

// parseOpenAIRequest checks the fields of an OpenAI request body the
// gateway acts on, whatever the endpoint: model, stream, stream_options.
// The fields' values are slices of body, which must not change after.
func parseOpenAIRequest(body []byte) (*chatRequest, error) {
	r := &chatRequest{}
	var ok bool
	if r.fields, ok = scanFields(body); !ok { // what it cannot read as encoding/json would
		if err := json.Unmarshal(body, &r.fields); err != nil || r.fields == nil {
			return nil, fmt.Errorf("the request body must be a JSON object: %v", jsonError(err))
		}
	}
	if m := r.fields["model"]; len(m) >= 2 && m[0] == '"' && bytes.IndexByte(m, '\\') < 0 {
		r.model = string(m[1 : len(m)-1]) // a string without escapes: its bytes (checked below)
	} else if err := json.Unmarshal(m, &r.model); err != nil {
		return nil, fmt.Errorf("model: must be a non-empty string")
	}
	if r.model == "" {
		return nil, fmt.Errorf("model: must be a non-empty string")
	}
	if !utf8.Valid(r.fields["model"]) { // encoding/json would have replaced the bytes
		return nil, fmt.Errorf("model: is not valid UTF-8")
	}
	switch raw, ok := r.fields["stream"]; {
	case !ok || string(raw) == "false":
	case string(raw) == "true":
		r.stream = true
	case !isNull(raw):
		if err := json.Unmarshal(raw, &r.stream); err != nil {
			return nil, fmt.Errorf("stream: must be a boolean")
		}
	}
	if err := openai.StandardTier(r.fields["service_tier"]); err != nil {
		return nil, err
	}
	if raw, ok := r.fields["stream_options"]; ok && !isNull(raw) {
		if r.includeUsage, ok = scanIncludeUsage(raw); !ok {
			var so struct {
				IncludeUsage *bool `json:"include_usage"`
			}
			if err := json.Unmarshal(raw, &so); err != nil {
				return nil, fmt.Errorf("stream_options: must be an object with a boolean include_usage")
			}
			r.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
		}
	}
	return r, nil
}

// oneChoice reports whether the request asks for one choice: n absent,
// null or 1 (OpenAI's n, "How many chat completion choices to generate
// for each input message"). Chat requests only: a legacy completions
// request's array of prompts gets n choices for each.
func (r *chatRequest) oneChoice() bool {
	n := bytes.TrimSpace(r.fields["n"])
	return isNull(n) || string(n) == "1"
}

// checkPassedKeys refuses body, parsed into r, when one of the members the
// gateway acts on (model, stream, stream_options, and stream_options'
// include_usage, service_tier, modalities, audio, n, the fallback models
// of provider.FallbackMembers, and what a prompt's estimate counts:
// messages, tools, functions, response_format, prediction) is not sent
// once and spelled exactly
// (provider.CheckPassedBody): the gateway reads them by their exact keys,
// while the other members go upstream as they are, to upstreams that may
// match keys as encoding/json does (any case, ſ for s). "Stream":true would
// make such an upstream stream an answer the gateway takes for a JSON
// body, and a later "ſtream_options" or "include_uſage" would turn off the
// usage report the gateway asks for. A later "Messages" was the prompt a
// translation (Anthropic's) sent upstream, while an estimate counted
// "messages" (and a later "Tools" the tool definitions it sent, while the
// estimate counted "tools"). It also refuses fallback models
// (provider.CheckOneModel).
func (r *chatRequest) checkPassedKeys(body []byte) error {
	if err := provider.CheckPassedBody(body, "model", "stream", "stream_options", "service_tier", "modalities", "audio", "n",
		"messages", "tools", "functions", "response_format", "prediction", "models", "fallbacks"); err != nil {
		return err
	}
	if raw := r.fields["messages"]; len(raw) > 0 {
		// The estimate reads each message and content part by
		// encoding/json too (chatPromptText).
		if err := provider.CheckFoldedKeys("messages", raw); err != nil {
			return err
		}
	}
	if raw := r.fields["stream_options"]; len(raw) > 0 && raw[0] == '{' {
		if err := provider.CheckPassedBody(raw, "include_usage"); err != nil {
			return fmt.Errorf("stream_options: %w", err)
		}
	}
	// No fallback models: the upstream would serve another model than the
	// one routed, allowed and priced. (Checked here, on the request's way
	// in, not in parseOpenAIRequest, which also reads journaled bodies for
	// a crashed request's estimate.)
	for _, name := range provider.FallbackMembers {
		if err := provider.CheckOneModel(name, r.fields[name]); err != nil {
			return err
		}
	}
	return nil
}

// scanIncludeUsage reads stream_options.include_usage (true, false or
// null, or absent: false) from raw, a valid JSON value, as encoding/json
// reads it, and reports whether it could: not for what is not an object,
// a repeated include_usage, one of another type, or a key encoding/json
// might match to it case-insensitively (escaped, upper-case or non-ASCII).
func scanIncludeUsage(raw []byte) (include, ok bool) {
	l := jsonscan.New(raw)
	if !l.Lit("{") {
		return false, false
	}
	if l.Lit("}") {
		return false, l.End()
	}
	seen := false
	for {
		key, escaped, ok := l.Span()
		if !ok || escaped || !l.Lit(":") {
			return false, false
		}
		for _, c := range key {
			if c >= 'A' && c <= 'Z' || c >= 0x80 {
				return false, false
			}
		}
		if string(key) == "include_usage" {
			if seen {
				return false, false
			}
			seen = true
			switch {
			case l.Lit("true"):
				include = true
			case l.Lit("false"), l.Lit("null"):
			default:
				return false, false
			}
		} else if !l.Skip() {
			return false, false
		}
		if l.Lit("}") {
			return include, l.End()
		}
		if !l.Lit(",") {
			return false, false
		}
	}
}

// scanFields reads a JSON object's members as encoding/json reads it into
// a map[string]json.RawMessage (a repeated key keeps its last value), but
// each value a slice of body rather than a copy, capacity-limited so that
// an append to it cannot write into body. It reports false, for the caller
// to use encoding/json, for anything else: not an object, invalid JSON, an
// escaped key or one of invalid UTF-8 (encoding/json unescapes or replaces
// them), nesting deeper than jsonscan.MaxDepth. FuzzScanFields holds it to
// encoding/json.
func scanFields(body []byte) (map[string]json.RawMessage, bool) {
	l := jsonscan.New(body)
	if !l.Lit("{") {
		return nil, false
	}
	fields := make(map[string]json.RawMessage, 8)
	if l.Lit("}") {
		return fields, l.End()
	}
	for {
		key, escaped, ok := l.Span()
		if !ok || escaped || !l.Lit(":") {
			return nil, false
		}
		l.WS()
		start := l.Pos()
		if !l.Skip() {
			return nil, false
		}
		end := l.Pos()
		fields[string(key)] = body[start:end:end]
		if l.Lit("}") {
			return fields, l.End()
		}
		if !l.Lit(",") {
			return nil, false
		}
	}
}

// upstreamBody is the request as sent upstream: model replaced by the
// upstream's name and, when streaming, usage always asked for. The other
// fields are copied as the client sent them (each once: a repeated key
// keeps its last value, as encoding/json read it), keys in sorted order.
func (r *chatRequest) upstreamBody(model string) ([]byte, error) {
	fields := maps.Clone(r.fields)
	fields["model"] = openai.AppendString(nil, model)
	if r.stream {
		if raw := r.fields["stream_options"]; string(raw) == includeUsage {
			fields["stream_options"] = raw // what the code below would write
		} else {
			so := map[string]json.RawMessage{}
			if !isNull(raw) {
				_ = json.Unmarshal(raw, &so)
			}
			so["include_usage"] = json.RawMessage("true")
			fields["stream_options"] = appendObject(nil, so)
		}
	}
	return appendObject(nil, fields), nil
}

// includeUsage is the stream_options that upstreamBody sends, as clients
// that ask for usage send it.
const includeUsage = `{"include_usage":true}`

// appendObject appends fields as a JSON object, keys sorted; the values are
// valid JSON already (as encoding/json returned them), so they are copied,
// not encoded again.
func appendObject(b []byte, fields map[string]json.RawMessage) []byte {
	size := 2
	for k, v := range fields {
		size += len(k) + len(v) + 4
	}
	b = slices.Grow(b, size)
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(fields)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = openai.AppendString(b, k)
		b = append(b, ':')
		b = append(b, fields[k]...)
	}
	return append(b, '}')
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// jsonError says why a request body is not a JSON object, in the
// client's terms: a body of another JSON type is named by its type
// ("got a JSON array"), never by the Go type it was decoded into.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return "got null"
	case errors.As(err, &te) && te.Field == "" && te.Value != "":
		return "got a JSON " + strings.Fields(te.Value)[0]
	}
	return err.Error()
}

// chatPromptText is the prompt of a chat request's messages array: the
// text of its string contents and text parts and of its assistant
// messages' tool calls (joined by spaces, which add no tokens of their
// own), then the JSON of its tool definitions (defs: "tools", and the
// older "functions"), and how many messages it holds, for estimating its
// prompt_tokens when the provider reports none.
func chatPromptText(messages json.RawMessage, defs ...json.RawMessage) tap.Prompt {
	// defs: see chatDefs.
	var msgs []struct {
		Name         string          `json:"name"`
		Refusal      string          `json:"refusal"`
		Content      json.RawMessage `json:"content"`
		ToolCalls    []toolCallText  `json:"tool_calls"`
		FunctionCall *functionText   `json:"function_call"` // deprecated
	}
	_ = json.Unmarshal(messages, &msgs)
	var b strings.Builder
	var media int64
	add := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	for _, m := range msgs {
		add(m.Name)
		add(m.Refusal)
		for _, tc := range m.ToolCalls {
			add(tc.Function.Name)
			add(tc.Function.Arguments)
		}
		if f := m.FunctionCall; f != nil {
			add(f.Name)
			add(f.Arguments)
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			add(text)
			continue
		}
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				Detail string `json:"detail"`
			} `json:"image_url"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		for _, p := range parts {
			add(p.Text)
			if p.Type == "image_url" {
				media += openai.ImageTokens(p.ImageURL.Detail)
			}
		}
	}
	for _, d := range defs {
		if len(d) > 0 && string(d) != "null" {
			add(string(d)) // the definitions reach the model as text, in the provider's own form
		}
	}
	return tap.Prompt{Text: b.String(), Messages: len(msgs), Media: media}
}

// chatDefs are the members of a chat request besides its messages that
// reach the model as text, and so count in an estimated prompt: tools and
// functions (their definitions), response_format (a JSON schema), and
// prediction (a predicted output, which the provider reads and bills).
func chatDefs(fields map[string]json.RawMessage) []json.RawMessage {
	return []json.RawMessage{fields["tools"], fields["functions"], fields["response_format"], fields["prediction"]}
}

// toolCallText is what an estimate counts of an assistant message's tool
// call: its function's name and arguments.
type toolCallText struct {
	Function functionText `json:"function"`
}

// functionText is a function call's name and arguments: a tool call's
// function, or an assistant message's deprecated function_call.
type functionText struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
