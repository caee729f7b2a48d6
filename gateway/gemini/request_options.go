package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
)

type toolOut struct {
	FunctionDeclarations []funcDecl `json:"functionDeclarations"`
}

// funcDecl is a FunctionDeclaration. Its parameters go as
// parametersJsonSchema: OpenAI's are JSON Schema (additionalProperties,
// $defs, type arrays, ...), which Gemini's "parameters" (an OpenAPI subset)
// refuses.
type funcDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	} `json:"functionCallingConfig"`
}

type generationConfig struct {
	MaxOutputTokens    *int64          `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	CandidateCount     *int64          `json:"candidateCount,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	ResponseMIMEType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  int64 `json:"thinkingBudget"`
	IncludeThoughts bool  `json:"includeThoughts,omitempty"`
}

// thinkingBudgets maps OpenAI's reasoning_effort to a Gemini thinkingBudget
// (tokens). OpenAI's efforts have no token figures: these are this
// package's choices. 24576 is the largest budget Gemini 2.5 Flash accepts;
// 0 turns thinking off where the model allows it.
var thinkingBudgets = map[string]int64{
	"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576, "max": 24576,
}

// options translates the request's other fields:
//
//   - tools (type "function" only): tools[{functionDeclarations:[{name,
//     description, parametersJsonSchema}]}], parameters passing as the
//     JSON Schema they are (Gemini's "parameters", an OpenAPI subset,
//     refuses additionalProperties, which OpenAI's strict mode requires,
//     $defs and type arrays); an object schema without properties is sent
//     without parameters;
//   - tool_choice: "auto" → AUTO, "none" → NONE, "required" → ANY,
//     {"type":"function","function":{"name"}} → ANY with
//     allowedFunctionNames [name] (toolConfig.functionCallingConfig);
//   - generationConfig: max_completion_tokens (else max_tokens) →
//     maxOutputTokens, temperature, top_p → topP, stop (a string or an
//     array) → stopSequences, n → candidateCount, seed, presence_penalty,
//     frequency_penalty; response_format json_object → responseMimeType
//     "application/json", json_schema → the same and responseJsonSchema;
//   - reasoning_effort → thinkingConfig{thinkingBudget, includeThoughts}:
//     none 0 (no thoughts), minimal and low 1024, medium 8192, high,
//     xhigh and max 24576, includeThoughts true but for none.
func (req *genRequest) options(f map[string]json.RawMessage) error {
	if err := req.tools(f["tools"], f["tool_choice"]); err != nil {
		return err
	}
	var gc generationConfig
	var err error
	set := func(fn func() error) {
		if err == nil {
			err = fn()
		}
	}
	set(func() error { return number(f, "max_tokens", &gc.MaxOutputTokens, 1) })
	set(func() error { return number(f, "max_completion_tokens", &gc.MaxOutputTokens, 1) })
	set(func() error { return number(f, "temperature", &gc.Temperature, 0) })
	set(func() error { return number(f, "top_p", &gc.TopP, 0) })
	set(func() error { return number(f, "n", &gc.CandidateCount, 1) })
	set(func() error { return number(f, "seed", &gc.Seed, -1<<63) })
	set(func() error { return number(f, "presence_penalty", &gc.PresencePenalty, -2) })
	set(func() error { return number(f, "frequency_penalty", &gc.FrequencyPenalty, -2) })
	set(func() error { return stops(f["stop"], &gc.StopSequences) })
	set(func() error { return responseFormat(f["response_format"], &gc) })
	if err != nil {
		return err
	}
	if raw := f["reasoning_effort"]; !isNull(raw) {
		var effort string
		_ = json.Unmarshal(raw, &effort)
		budget, ok := thinkingBudgets[effort]
		if !ok {
			return fmt.Errorf("reasoning_effort: must be one of none, minimal, low, medium, high, xhigh, max")
		}
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: budget, IncludeThoughts: budget > 0}
	}
	if b, _ := json.Marshal(&gc); string(b) != "{}" {
		req.GenerationConfig = &gc
	}
	return nil
}

// number decodes the optional numeric field name into *dst, which it sets
// only when the field is present and not null; values below low are refused.
func number[T int64 | float64](f map[string]json.RawMessage, name string, dst **T, low T) error {
	raw := f[name]
	if isNull(raw) {
		return nil
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		if _, ok := any(v).(int64); ok {
			return fmt.Errorf("%s: must be an integer", name)
		}
		return fmt.Errorf("%s: must be a number", name)
	}
	if v < low {
		return fmt.Errorf("%s: must be at least %v", name, low)
	}
	*dst = &v
	return nil
}

func stops(raw json.RawMessage, dst *[]string) error {
	if isNull(raw) {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		*dst = []string{one}
		return nil
	}
	if json.Unmarshal(raw, dst) != nil {
		return fmt.Errorf("stop: must be a string or an array of strings")
	}
	return nil
}

func responseFormat(raw json.RawMessage, gc *generationConfig) error {
	if isNull(raw) {
		return nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	_ = json.Unmarshal(raw, &rf)
	switch rf.Type {
	case "text":
	case "json_object":
		gc.ResponseMIMEType = "application/json"
	case "json_schema":
		if isNull(rf.JSONSchema.Schema) {
			return fmt.Errorf("response_format.json_schema.schema: must be a JSON schema")
		}
		gc.ResponseMIMEType, gc.ResponseJSONSchema = "application/json", rf.JSONSchema.Schema
	default:
		return fmt.Errorf("response_format.type: must be text, json_object or json_schema")
	}
	return nil
}

// tools translates tools and tool_choice.
func (req *genRequest) tools(raw, choice json.RawMessage) error {
	if !isNull(raw) {
		var tools []struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tools); err != nil {
			return fmt.Errorf("tools: must be an array of tools: %v", err)
		}
		var decls []funcDecl
		for i, t := range tools {
			if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
				return fmt.Errorf("tools[%d]: must be {\"type\":\"function\",\"function\":{\"name\":...}}", i)
			}
			d := funcDecl{Name: t.Function.Name, Description: t.Function.Description}
			if !isNull(t.Function.Parameters) && !emptyObject(t.Function.Parameters) {
				d.Parameters = t.Function.Parameters
			}
			decls = append(decls, d)
		}
		if len(decls) > 0 {
			req.Tools = []toolOut{{FunctionDeclarations: decls}}
		}
	}
	if isNull(choice) {
		return nil
	}
	tc := &toolConfig{}
	var mode string
	if json.Unmarshal(choice, &mode) == nil {
		tc.FunctionCallingConfig.Mode = map[string]string{"auto": "AUTO", "none": "NONE", "required": "ANY"}[mode]
	} else {
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(choice, &named) == nil && named.Type == "function" && named.Function.Name != "" {
			tc.FunctionCallingConfig.Mode = "ANY"
			tc.FunctionCallingConfig.AllowedFunctionNames = []string{named.Function.Name}
		}
	}
	if tc.FunctionCallingConfig.Mode == "" {
		return fmt.Errorf(`tool_choice: must be "auto", "none", "required" or {"type":"function","function":{"name":...}}`)
	}
	req.ToolConfig = tc
	return nil
}

// emptyObject reports whether a JSON schema is an object with no properties.
func emptyObject(schema json.RawMessage) bool {
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	return json.Unmarshal(schema, &s) == nil && s.Type == "object" && len(s.Properties) == 0
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
