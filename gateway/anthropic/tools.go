package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// tool is a Messages client tool definition.
type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// emptySchema is the input_schema of a function without parameters:
// Messages requires one, OpenAI does not.
const emptySchema = `{"type":"object","properties":{}}`

// convertTools translates OpenAI function tools into Messages tools: name,
// description, and parameters as input_schema. strict has no equivalent and
// is dropped; tools of other types are refused.
func convertTools(raws []json.RawMessage) ([]tool, error) {
	var out []tool
	for i, raw := range raws {
		f := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := decode(raw, &t, f); err != nil {
			return nil, err
		}
		if t.Type != "function" {
			return nil, fmt.Errorf("%s.type: %q tools are not supported (want function)", f, t.Type)
		}
		if t.Function.Name == "" {
			return nil, errors.New(f + ".function.name: missing")
		}
		schema := json.RawMessage(emptySchema)
		switch kindOf(t.Function.Parameters) {
		case 0, 'n':
		case '{':
			schema = bytes.TrimSpace(t.Function.Parameters)
		default:
			return nil, errors.New(f + ".function.parameters: not a JSON object")
		}
		out = append(out, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	return out, nil
}

// convertToolChoice translates tool_choice: "auto" → {type:auto},
// "required" → {type:any}, "none" → {type:none}, {type:function,
// function:{name}} → {type:tool,name}. parallel_tool_calls:false becomes
// disable_parallel_tool_use (on {type:auto} when tool_choice is absent;
// "none" has no such field). Without tools both are dropped, as Messages
// has nothing for them to apply to.
func convertToolChoice(raw json.RawMessage, parallel *bool, haveTools bool) (*toolChoice, error) {
	var tc toolChoice
	switch kindOf(raw) {
	case 0, 'n':
	case '"':
		var s string
		if err := decode(raw, &s, "tool_choice"); err != nil {
			return nil, err
		}
		switch s {
		case "auto":
			tc.Type = "auto"
		case "required":
			tc.Type = "any"
		case "none":
			tc.Type = "none"
		default:
			return nil, fmt.Errorf("tool_choice: unknown value %q (want auto, required or none)", s)
		}
	case '{':
		var o struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := decode(raw, &o, "tool_choice"); err != nil {
			return nil, err
		}
		if o.Type != "function" || o.Function.Name == "" {
			return nil, errors.New(`tool_choice: want {"type":"function","function":{"name":...}}`)
		}
		tc.Type, tc.Name = "tool", o.Function.Name
	default:
		return nil, errors.New("tool_choice: want a string or an object")
	}
	if !haveTools {
		return nil, nil
	}
	if parallel != nil && !*parallel && tc.Type != "none" {
		if tc.Type == "" {
			tc.Type = "auto"
		}
		tc.DisableParallelToolUse = true
	}
	if tc.Type == "" {
		return nil, nil
	}
	return &tc, nil
}
