package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/openai"
)

// message is a Messages API message; Content is a string or []block.
type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// block is a request content block: text, image, tool_use or tool_result.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   any             `json:"content,omitempty"`
}

// imageSource is an image block's source: base64 data or a URL.
type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// chatMessage is one OpenAI chat message.
type chatMessage struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []json.RawMessage `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
}

// contentPart is one OpenAI content part.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// convertMessages translates OpenAI messages. System and developer
// messages, wherever they are, become the top-level system (a string when
// there is one text, else text blocks), since Messages has no system role.
// User content stays a string or becomes text and image blocks. Assistant
// text and tool_calls become text and tool_use blocks (an assistant message
// with neither is dropped: Messages refuses empty content). Tool messages
// become tool_result blocks of a user message, consecutive ones merged.
func convertMessages(raws []json.RawMessage) (system any, out []message, err error) {
	var sys []block
	toolMsg := -1 // index in out of the user message collecting tool results
	for i, raw := range raws {
		f := fmt.Sprintf("messages[%d]", i)
		var m chatMessage
		if err := decode(raw, &m, f); err != nil {
			return nil, nil, err
		}
		cf := f + ".content"
		switch m.Role {
		case "system", "developer":
			s, err := content(m.Content, cf, false)
			if err != nil {
				return nil, nil, err
			}
			sys = append(sys, s...)
			continue
		case "user":
			if kindOf(m.Content) == '"' {
				var s string
				if err := decode(m.Content, &s, cf); err != nil || s == "" {
					return nil, nil, cmp.Or(err, errors.New(cf+": empty"))
				}
				out = append(out, message{"user", s})
				break
			}
			c, err := content(m.Content, cf, true)
			if err == nil && len(c) == 0 {
				err = errors.New(cf + ": empty")
			}
			if err != nil {
				return nil, nil, err
			}
			out = append(out, message{"user", c})
		case "assistant":
			var c []block
			if k := kindOf(m.Content); k != 0 && k != 'n' {
				if c, err = content(m.Content, cf, false); err != nil {
					return nil, nil, err
				}
			}
			for j, raw := range m.ToolCalls {
				b, err := toolUse(raw, fmt.Sprintf("%s.tool_calls[%d]", f, j))
				if err != nil {
					return nil, nil, err
				}
				c = append(c, b)
			}
			if len(c) > 0 {
				out = append(out, message{"assistant", c})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, errors.New(f + ".tool_call_id: missing")
			}
			res := block{Type: "tool_result", ToolUseID: m.ToolCallID}
			switch kindOf(m.Content) {
			case 0, 'n':
			case '"':
				var s string
				if err = decode(m.Content, &s, cf); s != "" {
					res.Content = s
				}
			default:
				var c []block
				if c, err = content(m.Content, cf, false); len(c) > 0 {
					res.Content = c
				}
			}
			if err != nil {
				return nil, nil, err
			}
			if toolMsg >= 0 && toolMsg == len(out)-1 {
				out[toolMsg].Content = append(out[toolMsg].Content.([]block), res)
				continue
			}
			out = append(out, message{"user", []block{res}})
			toolMsg = len(out) - 1
			continue
		default:
			return nil, nil, fmt.Errorf("%s.role: unknown role %q", f, m.Role)
		}
		toolMsg = -1
	}
	if len(out) == 0 {
		return nil, nil, errors.New("messages: no user or assistant message")
	}
	if len(sys) == 1 {
		return sys[0].Text, out, nil
	}
	if len(sys) > 1 {
		return sys, out, nil
	}
	return nil, out, nil
}

// content translates message content (a string or an array of parts) into
// blocks: text parts (and refusal parts, as text) become text blocks, and
// image_url parts become image blocks when images is true. Empty text is
// dropped; Messages refuses empty text blocks.
func content(raw json.RawMessage, field string, images bool) ([]block, error) {
	switch kindOf(raw) {
	case '"':
		var s string
		if err := decode(raw, &s, field); err != nil || s == "" {
			return nil, err
		}
		return []block{{Type: "text", Text: s}}, nil
	case '[':
	default:
		return nil, errors.New(field + ": want a string or an array of content parts")
	}
	var parts []json.RawMessage
	if err := decode(raw, &parts, field); err != nil {
		return nil, err
	}
	var out []block
	for i, raw := range parts {
		f := fmt.Sprintf("%s[%d]", field, i)
		var p contentPart
		if err := decode(raw, &p, f); err != nil {
			return nil, err
		}
		switch {
		case p.Type == "text" || p.Type == "refusal":
			if t := p.Text + p.Refusal; t != "" {
				out = append(out, block{Type: "text", Text: t})
			}
		case p.Type == "image_url" && images:
			if p.ImageURL == nil {
				return nil, errors.New(f + ".image_url: missing")
			}
			b, err := image(p.ImageURL.URL, f+".image_url.url")
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		default:
			return nil, fmt.Errorf("%s.type: %q parts are not supported here", f, p.Type)
		}
	}
	return out, nil
}

// image translates an image URL: a base64 data: URL of a JPEG, PNG, GIF or
// WebP image (the types Anthropic's vision guide lists) becomes a base64
// source; an http(s) URL becomes a url source, fetched by Anthropic.
func image(url, field string) (block, error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mt, b64 := strings.CutSuffix(meta, ";base64")
		if !ok || !b64 || data == "" {
			return block{}, errors.New(field + ": a data URL must hold base64 data")
		}
		switch mt = strings.ToLower(mt); mt {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return block{}, fmt.Errorf("%s: media type %q is not supported (want image/jpeg, png, gif or webp)", field, mt)
		}
		return block{Type: "image", Source: &imageSource{Type: "base64", MediaType: mt, Data: data}}, nil
	}
	if l := strings.ToLower(url); strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://") {
		return block{Type: "image", Source: &imageSource{Type: "url", URL: url}}, nil
	}
	return block{}, errors.New(field + ": want a data: URL or an http(s) URL")
}

// toolUse translates one assistant tool call into a tool_use block. Its
// arguments, a JSON string, must hold a JSON object ("" counts as {}).
func toolUse(raw json.RawMessage, field string) (block, error) {
	var c openai.ToolCall // the request's tool call has the response's shape
	if err := decode(raw, &c, field); err != nil {
		return block{}, err
	}
	switch {
	case c.Type != "" && c.Type != "function":
		return block{}, fmt.Errorf("%s.type: %q tool calls are not supported", field, c.Type)
	case c.ID == "":
		return block{}, errors.New(field + ".id: missing")
	case c.Function.Name == "":
		return block{}, errors.New(field + ".function.name: missing")
	}
	args := bytes.TrimSpace([]byte(c.Function.Arguments))
	if len(args) == 0 {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return block{}, errors.New(field + ".function.arguments: not a JSON object")
	}
	return block{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: args}, nil
}
