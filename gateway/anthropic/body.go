package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// completion is an OpenAI chat.completion object.
type completion struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      replyMsg  `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type replyMsg struct {
	Role             string            `json:"role"`
	Content          *string           `json:"content"`
	ReasoningContent string            `json:"reasoning_content,omitempty"`
	ToolCalls        []openai.ToolCall `json:"tool_calls,omitempty"`
}

// Body translates a whole non-streamed Messages response into a
// chat.completion object carrying id, model and created, and taps its usage
// into r as BodyUsage does (Final when the response has usage). The one
// choice's message holds the text blocks, concatenated, as content (null
// when there is none but tool calls), the thinking blocks as
// reasoning_content, and the tool_use blocks as tool_calls (input as the
// arguments string); finish_reason is the mapped stop_reason. usage is
// OpenAI's usage object of the normalized figures, absent when the
// response has none. It returns an error for a body that is not a Messages
// response, or that is an Anthropic error object (after setting r.Error).
func (Chat) Body(body []byte, id, model string, created int64, r *tap.Report) ([]byte, error) {
	m, err := bodyUsage(body, r)
	if err != nil {
		return nil, err
	}
	if m.Type == "error" || m.Error != nil {
		return nil, fmt.Errorf("upstream error: %s", r.Error)
	}
	msg := replyMsg{Role: "assistant"}
	var text, reasoning strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			var c openai.ToolCall
			c.ID, c.Type, c.Function.Name, c.Function.Arguments = b.ID, "function", b.Name, "{}"
			var args bytes.Buffer
			if len(b.Input) > 0 && json.Compact(&args, b.Input) == nil && args.String() != "null" {
				c.Function.Arguments = args.String()
			}
			msg.ToolCalls = append(msg.ToolCalls, c)
		}
	}
	if t := text.String(); t != "" || len(msg.ToolCalls) == 0 {
		msg.Content = &t
	}
	msg.ReasoningContent = reasoning.String()
	out := completion{ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []choice{{Message: msg}}}
	if r.FinishReason != "" {
		out.Choices[0].FinishReason = &r.FinishReason
	}
	if r.Reported {
		out.Usage = openai.AppendUsage(nil, r.Usage)
	}
	return marshal(out)
}

// PromptText returns the text of a Messages request that a tokenizer counts
// to estimate its prompt (Prompt's Text). It returns "" for a body it
// cannot read.
func PromptText(body []byte) string { return Prompt(body).Text }
