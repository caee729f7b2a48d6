package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/tap"
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
	return r, nil
}

// parseOpenAIRequest checks the fields of an OpenAI request body the
// gateway acts on, whatever the endpoint: model, stream, stream_options.
func parseOpenAIRequest(body []byte) (*chatRequest, error) {
	r := &chatRequest{}
	if err := json.Unmarshal(body, &r.fields); err != nil || r.fields == nil {
		return nil, fmt.Errorf("the request body must be a JSON object: %v", jsonError(err))
	}
	if err := json.Unmarshal(r.fields["model"], &r.model); err != nil || r.model == "" {
		return nil, fmt.Errorf("model: must be a non-empty string")
	}
	if !utf8.Valid(r.fields["model"]) { // encoding/json would have replaced the bytes
		return nil, fmt.Errorf("model: is not valid UTF-8")
	}
	if raw, ok := r.fields["stream"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.stream); err != nil {
			return nil, fmt.Errorf("stream: must be a boolean")
		}
	}
	if raw, ok := r.fields["stream_options"]; ok && !isNull(raw) {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return nil, fmt.Errorf("stream_options: must be an object with a boolean include_usage")
		}
		r.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	return r, nil
}

// upstreamBody is the request as sent upstream: model replaced by the
// upstream's name and, when streaming, usage always asked for. The other
// fields are copied as the client sent them (each once: a repeated key
// keeps its last value, as encoding/json read it), keys in sorted order.
func (r *chatRequest) upstreamBody(model string) ([]byte, error) {
	fields := maps.Clone(r.fields)
	fields["model"] = openai.AppendString(nil, model)
	if r.stream {
		so := map[string]json.RawMessage{}
		if raw := r.fields["stream_options"]; !isNull(raw) {
			_ = json.Unmarshal(raw, &so)
		}
		so["include_usage"] = json.RawMessage("true")
		fields["stream_options"] = appendObject(nil, so)
	}
	return appendObject(nil, fields), nil
}

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

func jsonError(err error) string {
	if err == nil {
		return "got null"
	}
	return err.Error()
}

// chatPromptText is the prompt of a chat request's messages array: the
// text of its string contents and text parts (joined by spaces, which add
// no tokens of their own), and how many messages it holds, for estimating
// its prompt_tokens when the provider reports none.
func chatPromptText(messages json.RawMessage) tap.Prompt {
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(messages, &msgs)
	var b strings.Builder
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
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			add(text)
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		for _, p := range parts {
			add(p.Text)
		}
	}
	return tap.Prompt{Text: b.String(), Messages: len(msgs)}
}
