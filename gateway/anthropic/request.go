package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Chat serves OpenAI chat completions (POST /v1/chat/completions) from
// Anthropic's Messages API, translating the request (Request), the response
// stream (NewStream) and a whole response (Body). It has no state.
type Chat struct{}

// APIVersion is the anthropic-version header every request carries
// (Anthropic API reference, "Versions").
const APIVersion = "2023-06-01"

// DefaultMaxTokens is the max_tokens sent when the client gave neither
// max_completion_tokens nor max_tokens: Messages requires it, OpenAI does
// not. With thinking on, the thinking budget is added to it.
const DefaultMaxTokens = 4096

// chatRequest is the part of an OpenAI chat completion request that has a
// Messages equivalent. Other fields (seed, logprobs, penalties, ...) have
// none and are ignored.
type chatRequest struct {
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	Stop                json.RawMessage   `json:"stop"`
	ReasoningEffort     string            `json:"reasoning_effort"`
	Thinking            json.RawMessage   `json:"thinking"`
	User                string            `json:"user"`
	N                   *int64            `json:"n"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
}

// messagesRequest is the Messages request the gateway sends.
type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int64           `json:"max_tokens"`
	System        any             `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	Thinking      json.RawMessage `json:"thinking,omitempty"`
	OutputConfig  *outputConfig   `json:"output_config,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata,omitempty"`
}

// outputConfig is a Messages request's output_config: format is
// structured outputs' {"type":"json_schema","schema":...}.
type outputConfig struct {
	Format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	} `json:"format"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Request translates an OpenAI chat completion request into a Messages
// request for upstreamModel, to POST at "/messages" below the provider's
// base URL (which ends in /v1). The mapping:
//
//   - system and developer messages → the top-level system; user and
//     assistant content (strings, text parts, image_url parts as base64 or
//     url image sources) → content blocks; assistant tool_calls → tool_use
//     blocks; tool messages → tool_result blocks of one user message
//   - tools (function only) → tools with input_schema; tool_choice auto,
//     required, none, {function} → auto, any, none, {tool}; parallel_tool_calls
//     false → disable_parallel_tool_use
//   - max_completion_tokens or max_tokens → max_tokens (DefaultMaxTokens
//     when absent, plus any thinking budget); reasoning_effort minimal,
//     low, medium, high, xhigh, max → thinking {type:enabled,
//     budget_tokens 1024, 1024, 4096, 16384, 24576, 24576}, trimmed
//     below max_tokens (1024 is Anthropic's minimum; a smaller limit is an
//     error); a thinking object passes as it is
//   - thinking is left out of a request that continues a tool loop (its
//     last message holds tool results): the assistant turn before it is
//     sent without its thinking block, which chat completions have no
//     field to carry back, and Anthropic refuses such a turn with
//     thinking on; and of a request whose tool_choice forces a
//     call (required, or a named function), which Anthropic refuses with
//     thinking on
//   - response_format json_schema → output_config.format {type
//     json_schema, schema} (structured outputs, for the models that have
//     them); text and json_object, which has no Messages equivalent, are
//     dropped
//   - stop → stop_sequences; temperature as it is up to 1 (Anthropic's
//     most; OpenAI's is 2), 1 above; top_p as it is, but only one of the
//     two when both are set (see oneSampler); user → metadata.user_id;
//     stream from the argument
//
// Fields without an equivalent (seed, logprobs, penalties, ...) are
// dropped; n other than 1 is refused. Its errors are the client's
// and name the field at fault, such as
// "messages[2].tool_calls[0].function.arguments: not a JSON object".
func (Chat) Request(body []byte, upstreamModel string, stream bool) (string, []byte, error) {
	var in chatRequest
	if err := decode(body, &in, ""); err != nil {
		return "", nil, err
	}
	out := messagesRequest{Model: upstreamModel, Stream: stream, Temperature: in.Temperature, TopP: in.TopP}
	if out.Temperature != nil && *out.Temperature > 1 {
		// OpenAI's range is 0 to 2, Anthropic's 0 to 1, and it refuses
		// a request above it: the most random it takes.
		one := 1.0
		out.Temperature = &one
	}
	oneSampler(&out)
	if in.N != nil && *in.N != 1 {
		return "", nil, errors.New("n: Anthropic returns one choice; only 1 is supported")
	}
	var err error
	if out.System, out.Messages, err = convertMessages(in.Messages); err != nil {
		return "", nil, err
	}
	if out.Tools, err = convertTools(in.Tools); err != nil {
		return "", nil, err
	}
	if out.ToolChoice, err = convertToolChoice(in.ToolChoice, in.ParallelToolCalls, len(out.Tools) > 0); err != nil {
		return "", nil, err
	}
	if out.StopSequences, err = convertStop(in.Stop); err != nil {
		return "", nil, err
	}
	if err := limits(&in, &out); err != nil {
		return "", nil, err
	}
	if out.OutputConfig, err = convertResponseFormat(in.ResponseFormat); err != nil {
		return "", nil, err
	}
	if out.Thinking != nil && (inToolTurn(out.Messages) || forcesTool(out.ToolChoice)) {
		// The assistant's tool_use turn goes back without its thinking
		// block (chat completions carry no signature for it), which
		// Anthropic refuses with thinking on ("Extended thinking": the
		// last assistant turn of a tool loop must keep its signed
		// thinking): the turn goes on without thinking. So does a
		// request whose tool_choice forces a call (any, or a named
		// tool), which Anthropic refuses with thinking on ("Thinking may
		// not be enabled when tool_choice forces tool use") where OpenAI
		// takes it with reasoning_effort: the call is what was asked for.
		out.Thinking = nil
	}
	if in.User != "" {
		out.Metadata = &struct {
			UserID string `json:"user_id"`
		}{in.User}
	}
	b, err := marshal(out)
	if err != nil {
		return "", nil, fmt.Errorf("messages request: %w", err)
	}
	return "/messages", b, nil
}

// maxEffortBudget is the thinking budget, in tokens, of reasoning_effort
// xhigh and max: with DefaultMaxTokens, 28,672 tokens of output, within
// every thinking model's output limit (Claude Opus 4's 32,000 the least).
const maxEffortBudget = 24576

// limits sets max_tokens and thinking. max_completion_tokens wins over
// max_tokens; both are output limits that include reasoning, as Messages'
// max_tokens includes the thinking budget. A thinking object the client
// sent passes as it is (without a client limit, max_tokens is then
// DefaultMaxTokens + its budget_tokens). Otherwise reasoning_effort turns
// on extended thinking with budget_tokens minimal/low 1024 (the minimum),
// medium 4096, high 16384, xhigh and max maxEffortBudget ("none" or
// absent: no thinking). The budget must
// stay below max_tokens: without a client limit max_tokens becomes
// DefaultMaxTokens + budget; with one, the budget shrinks to fit, and a
// limit of 1024 or less cannot hold the minimum budget, an error.
func limits(in *chatRequest, out *messagesRequest) error {
	field, lim := "max_completion_tokens", in.MaxCompletionTokens
	if lim == nil {
		field, lim = "max_tokens", in.MaxTokens
	}
	if lim != nil && *lim <= 0 {
		return fmt.Errorf("%s: must be positive, got %d", field, *lim)
	}
	if t := bytes.TrimSpace(in.Thinking); len(t) > 0 && string(t) != "null" {
		if t[0] != '{' {
			return errors.New("thinking: not a JSON object")
		}
		out.Thinking = t
		var th struct {
			BudgetTokens int64 `json:"budget_tokens"`
		}
		_ = json.Unmarshal(t, &th)
		if lim == nil && th.BudgetTokens > 0 {
			out.MaxTokens = DefaultMaxTokens + th.BudgetTokens
			return nil
		}
	}
	var budget int64
	if out.Thinking == nil {
		switch in.ReasoningEffort {
		case "", "none":
		case "minimal", "low":
			budget = 1024
		case "medium":
			budget = 4096
		case "high":
			budget = 16384
		case "xhigh", "max":
			budget = maxEffortBudget
		default:
			return fmt.Errorf("reasoning_effort: unknown value %q (want none, minimal, low, medium, high, xhigh or max)", in.ReasoningEffort)
		}
	}
	out.MaxTokens = DefaultMaxTokens + budget
	if lim != nil {
		out.MaxTokens = *lim
		if budget >= *lim {
			if budget = *lim - 1; budget < 1024 {
				return fmt.Errorf("reasoning_effort: thinking needs %s above 1024, got %d", field, *lim)
			}
		}
	}
	if budget > 0 {
		out.Thinking = fmt.Appendf(nil, `{"type":"enabled","budget_tokens":%d}`, budget)
	}
	return nil
}

// convertResponseFormat turns response_format json_schema into
// output_config, its schema an object; other formats have no equivalent
// (nil).
func convertResponseFormat(raw json.RawMessage) (*outputConfig, error) {
	if k := kindOf(raw); k == 0 || k == 'n' {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := decode(raw, &rf, "response_format"); err != nil || rf.Type != "json_schema" {
		return nil, err
	}
	if kindOf(rf.JSONSchema.Schema) != '{' {
		return nil, errors.New("response_format.json_schema.schema: not a JSON object")
	}
	oc := new(outputConfig)
	oc.Format.Type, oc.Format.Schema = "json_schema", bytes.TrimSpace(rf.JSONSchema.Schema)
	return oc, nil
}

// convertStop turns stop (a string or an array of strings) into
// stop_sequences.
func convertStop(raw json.RawMessage) ([]string, error) {
	switch k := kindOf(raw); k {
	case 0, 'n':
		return nil, nil
	case '"':
		var s string
		err := decode(raw, &s, "stop")
		return []string{s}, err
	case '[':
		var ss []string
		err := decode(raw, &ss, "stop")
		return ss, err
	}
	return nil, errors.New("stop: want a string or an array of strings")
}

// marshal is json.Marshal without HTML escaping, so text passes unaltered.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// oneSampler leaves out one of temperature and top_p when both are set:
// Claude Opus 4.1 and later refuse the pair (400 "temperature and top_p
// cannot both be specified for this model"), which OpenAI takes. The one
// that goes is top_p at 1 or temperature at 1 (Anthropic's default, what
// a temperature above 1 has become), which change nothing; otherwise
// top_p, temperature being the one clients tune.
func oneSampler(out *messagesRequest) {
	if out.Temperature == nil || out.TopP == nil {
		return
	}
	if *out.TopP < 1 && *out.Temperature == 1 {
		out.Temperature = nil
		return
	}
	out.TopP = nil
}

// forcesTool reports whether tc makes the model call a tool: {type:any}
// (OpenAI's "required") or {type:tool} (a named function).
func forcesTool(tc *toolChoice) bool {
	return tc != nil && (tc.Type == "any" || tc.Type == "tool")
}

// inToolTurn reports whether msgs end in tool results: the request goes
// on with an assistant turn that called tools.
func inToolTurn(msgs []message) bool {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return false
	}
	blocks, _ := msgs[len(msgs)-1].Content.([]block)
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}
