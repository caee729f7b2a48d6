package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Chat translates OpenAI chat completions to and from the Gemini API: it is
// the gateway's chatUpstream for Gemini providers. The zero Chat is ready.
type Chat struct{}

// genRequest is the GenerateContentRequest body the translation produces.
type genRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []toolOut         `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string    `json:"role,omitempty"`
	Parts []reqPart `json:"parts"`
}

// reqPart is a request Part; exactly one of its data fields is set.
type reqPart struct {
	Text             string       `json:"text,omitempty"`
	InlineData       *blob        `json:"inlineData,omitempty"`
	FileData         *fileData    `json:"fileData,omitempty"`
	FunctionCall     *callOut     `json:"functionCall,omitempty"`
	FunctionResponse *responseOut `json:"functionResponse,omitempty"`
	ThoughtSignature string       `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MIMEType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type callOut struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type responseOut struct {
	Name     string `json:"name"`
	Response struct {
		Content string `json:"content"`
	} `json:"response"`
}

// skipSignature is the placeholder thought signature Google documents for
// function calls replayed without the signature the model returned
// (https://ai.google.dev/gemini-api/docs/thought-signatures). Gemini 3
// models refuse a history whose function calls carry none.
const skipSignature = "skip_thought_signature_validator"

// message is one OpenAI chat message, as far as the translation reads it.
type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string   `json:"id"`
		Function function `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *function `json:"function_call"` // deprecated
}

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Request translates an OpenAI chat completion request into a Gemini
// GenerateContentRequest for upstreamModel. The path is
// "/models/{model}:streamGenerateContent?alt=sse" when stream is true and
// "/models/{model}:generateContent" otherwise, the model path-escaped (a
// leading "models/" is dropped). Messages map as follows:
//
//   - system and developer: systemInstruction (text only; none when
//     they hold no text);
//   - user: a "user" turn (consecutive messages of one role share a
//     turn); text, image_url (a data: URL becomes inlineData,
//     an http(s) or gs:// URL fileData, its MIME type guessed from the
//     extension or "image/*"), input_audio and file (file_data) parts;
//   - assistant: a "model" turn; its text, and its tool_calls as
//     functionCall parts (arguments parsed as the args object), each with
//     Google's placeholder thought signature for models after Gemini 2,
//     and so its deprecated function_call;
//   - tool (and legacy function): a functionResponse part
//     {name, response:{content}} in a "user" turn, its name found from the
//     tool_call_id among the earlier assistant tool calls; consecutive
//     tool messages share one turn.
//
// Tools, tool_choice and the generation parameters map as described at
// (*genRequest).options. Fields it does not list (logprobs, user,
// parallel_tool_calls, stream_options, ...) are ignored. Errors name the
// field at fault and are the client's.
func (Chat) Request(body []byte, upstreamModel string, stream bool) (string, []byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return "", nil, errors.New("the request body must be a JSON object")
	}
	var req genRequest
	if err := req.messages(fields["messages"], signs(upstreamModel)); err != nil {
		return "", nil, err
	}
	if err := req.options(fields); err != nil {
		return "", nil, err
	}
	out, err := json.Marshal(&req)
	if err != nil {
		return "", nil, fmt.Errorf("encoding the Gemini request: %w", err)
	}
	model := modelPath(strings.TrimPrefix(upstreamModel, "models/"))
	if stream {
		return model + ":streamGenerateContent?alt=sse", out, nil
	}
	return model + ":generateContent", out, nil
}

// modelPath is the upstream path of model, "/models/{model}", the name
// path-escaped with its colons too: a colon ends the name in Gemini's
// paths (":generateContent"), and url.PathEscape leaves it, so a name
// holding one would choose the method.
func modelPath(model string) string {
	return "/models/" + strings.ReplaceAll(url.PathEscape(model), ":", "%3A")
}

// signs reports whether replayed function calls need a thought signature:
// for every model but the Gemini 1 and 2 families, which predate them.
func signs(model string) bool {
	return !strings.Contains(model, "gemini-1") && !strings.Contains(model, "gemini-2")
}

// messages translates the messages array into contents and
// systemInstruction.
func (req *genRequest) messages(raw json.RawMessage, sign bool) error {
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return errors.New("messages: must be a non-empty array of messages")
	}
	names := map[string]string{} // tool_call_id → function name, latest wins
	toolTurn := false            // the last turn holds only function responses
	for i, mr := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		var m message
		if err := json.Unmarshal(mr, &m); err != nil {
			return fmt.Errorf("%s: must be a message object: %v", field, err)
		}
		switch m.Role {
		case "system", "developer":
			parts, err := contentParts(m.Content, field+".content", false)
			if err != nil {
				return err
			}
			if len(parts) == 0 {
				break // no systemInstruction without parts
			}
			if req.SystemInstruction == nil {
				req.SystemInstruction = &content{}
			}
			req.SystemInstruction.Parts = append(req.SystemInstruction.Parts, parts...)
		case "user", "assistant":
			parts, err := contentParts(m.Content, field+".content", m.Role == "user")
			if err != nil {
				return err
			}
			role := "user"
			if m.Role == "assistant" {
				role = "model"
				for j, tc := range m.ToolCalls {
					p, err := callPart(tc.Function, fmt.Sprintf("%s.tool_calls[%d].function", field, j), sign)
					if err != nil {
						return err
					}
					names[tc.ID] = tc.Function.Name
					parts = append(parts, p)
				}
				if m.FunctionCall != nil {
					p, err := callPart(*m.FunctionCall, field+".function_call", sign)
					if err != nil {
						return err
					}
					parts = append(parts, p)
				}
			}
			switch n := len(req.Contents); {
			case len(parts) == 0:
			case n > 0 && req.Contents[n-1].Role == role && !toolTurn:
				// Consecutive messages of one role share a turn, as some
				// models require turns to alternate.
				req.Contents[n-1].Parts = append(req.Contents[n-1].Parts, parts...)
			default:
				req.Contents = append(req.Contents, content{Role: role, Parts: parts})
				toolTurn = false
			}
		case "tool", "function":
			name := m.Name
			if m.Role == "tool" {
				var ok bool
				if name, ok = names[m.ToolCallID]; !ok {
					return fmt.Errorf("%s.tool_call_id: %q matches no earlier assistant tool call", field, m.ToolCallID)
				}
			} else if name == "" {
				return fmt.Errorf("%s.name: must be a non-empty string", field)
			}
			parts, err := contentParts(m.Content, field+".content", false)
			if err != nil {
				return err
			}
			p := reqPart{FunctionResponse: &responseOut{Name: name}}
			for _, tp := range parts {
				p.FunctionResponse.Response.Content += tp.Text
			}
			if toolTurn {
				last := &req.Contents[len(req.Contents)-1]
				last.Parts = append(last.Parts, p)
			} else {
				req.Contents = append(req.Contents, content{Role: "user", Parts: []reqPart{p}})
				toolTurn = true
			}
		default:
			return fmt.Errorf("%s.role: %q is not one of system, developer, user, assistant, tool", field, m.Role)
		}
	}
	if len(req.Contents) == 0 {
		return errors.New("messages: must hold at least one user or assistant message with content")
	}
	return nil
}

// callPart translates a tool call's function, or a function_call, at
// field into a functionCall part.
func callPart(fn function, field string, sign bool) (reqPart, error) {
	if fn.Name == "" {
		return reqPart{}, fmt.Errorf("%s.name: must be a non-empty string", field)
	}
	args, err := parseArgs(fn.Arguments)
	if err != nil {
		return reqPart{}, fmt.Errorf("%s.arguments: must be a JSON object: %v", field, err)
	}
	p := reqPart{FunctionCall: &callOut{Name: fn.Name, Args: args}}
	if sign {
		p.ThoughtSignature = skipSignature
	}
	return p, nil
}

// parseArgs parses a tool call's arguments string into a JSON object ("{}"
// when empty).
func parseArgs(s string) (json.RawMessage, error) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(b) {
		return nil, errors.New("not valid JSON")
	}
	if b[0] != '{' {
		return nil, errors.New("not an object")
	}
	return b, nil
}
