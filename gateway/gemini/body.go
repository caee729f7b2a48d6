package gemini

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"slices"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// completion is OpenAI's chat.completion object as Body writes it.
type completion struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []choiceOut     `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type choiceOut struct {
	Index   int `json:"index"`
	Message struct {
		Role             string            `json:"role"`
		Content          *string           `json:"content"`
		ReasoningContent string            `json:"reasoning_content,omitempty"`
		ToolCalls        []openai.ToolCall `json:"tool_calls,omitempty"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
	text         []byte  // joined before encoding; never a strings.Builder,
	reasoning    []byte  // which choices' reallocation would copy
}

// Body translates a non-streamed generateContent response (or a JSON array
// of streamed responses, joined in order) into a chat.completion object
// with id, model and created, and taps its usage into r as BodyUsage does.
// Candidate n becomes choice n: its text parts are message.content (null
// when there are none), its thought parts message.reasoning_content, its
// functionCall parts message.tool_calls (ids as in a stream, see callID),
// and its finishReason is mapped as Tap maps it (null when absent); a
// prompt blocked outright is choice 0 with finish_reason "content_filter".
// usage is OpenAI's usage object of the normalized figures, and is left out
// when the response reported none. An error body returns an error (after
// setting r.Error), and a body that is not a response ErrNoResponse.
func (Chat) Body(body []byte, id, model string, created int64, r *tap.Report) ([]byte, error) {
	resps, err := tapBody(body, r)
	if err != nil {
		return nil, err
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	out := completion{ID: id, Object: "chat.completion", Created: created, Model: model, Choices: []choiceOut{}}
	at := make(map[int]int) // candidate index → position in out.Choices (no scan per candidate)
	choice := func(i int) *choiceOut {
		i = max(i, 0)
		if k, ok := at[i]; ok {
			return &out.Choices[k]
		}
		at[i] = len(out.Choices)
		out.Choices = append(out.Choices, choiceOut{Index: i})
		return &out.Choices[len(out.Choices)-1]
	}
	for _, resp := range resps {
		for _, c := range resp.Candidates {
			ch := choice(c.Index)
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					tc := openai.ToolCall{ID: callID(callIDPrefix(id), ch.Index, len(ch.Message.ToolCalls)), Type: "function"}
					tc.Function.Name, tc.Function.Arguments = p.FunctionCall.Name, argsJSON(p.FunctionCall.Args)
					ch.Message.ToolCalls = append(ch.Message.ToolCalls, tc)
				case p.Thought:
					ch.reasoning = append(ch.reasoning, p.Text...)
				default:
					ch.text = append(ch.text, p.Text...)
				}
			}
			if c.FinishReason != "" {
				fr := finishReason(c.FinishReason, len(ch.Message.ToolCalls) > 0)
				ch.FinishReason = &fr
			}
		}
		if len(resp.Candidates) == 0 && resp.PromptFeedback != nil && resp.PromptFeedback.BlockReason != "" {
			fr := "content_filter"
			choice(0).FinishReason = &fr
		}
	}
	slices.SortFunc(out.Choices, func(a, b choiceOut) int { return cmp.Compare(a.Index, b.Index) })
	for i := range out.Choices {
		ch := &out.Choices[i]
		ch.Message.Role = "assistant"
		if len(ch.text) > 0 {
			s := string(ch.text)
			ch.Message.Content = &s
		}
		ch.Message.ReasoningContent = string(ch.reasoning)
	}
	if r.Reported {
		out.Usage = openai.AppendUsage(nil, r.Usage)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
