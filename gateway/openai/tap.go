package openai

import (
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// ChatTap reads usage from a Chat Completions stream, chunk by chunk.
//
// Upstreams put the usage in a last chunk with "choices":[] (OpenAI with
// include_usage), in the finish chunk, in a chunk after the finish chunk
// whose choices are not empty, or repeated and cumulative in every chunk;
// some send none. The last report wins; it is final once it arrives in the
// finish chunk or after it, or in a choices-less chunk after output (a
// choices-less report before any output counts the prompt only: the
// stream may yet break before its final report).
type ChatTap struct {
	finished    bool
	settled     bool
	afterFinish bool // the last report came with a finish reason or after one
}

// Settled reports whether the last usage report came in a choices-less
// chunk after output and a finish reason, and no choice came after it:
// OpenAI's usage chunk, which follows every choice's end (all n of them),
// so that only [DONE] is to come. A report in a finish chunk may be one
// choice's of several (n > 1, usage on every chunk), and is not settled;
// nor is a choices-less report before any finish (an upstream's progress
// report, which more output may follow after a pause).
func (t *ChatTap) Settled() bool { return t.settled }

// ReportedAfterFinish reports whether the last usage report came with a
// finish reason or after one (any choice's): with one choice, the last
// report of the stream; a report before it is a progress report.
func (t *ChatTap) ReportedAfterFinish() bool { return t.afterFinish }

// Chunk observes one parsed chunk (or a whole non-streamed completion).
func (t *ChatTap) Chunk(c *Chunk, r *tap.Report) {
	if c.Model != "" {
		r.ServedModel = c.Model
	}
	if fr := c.FinishReason(); fr != "" {
		r.FinishReason = fr
		t.finished = true
	}
	if c.Error != nil {
		r.Error = "upstream error frame: " + string(c.Error)
	}
	r.AddOutputBytes(c.shadow) // a chunk whose output a client may read otherwise (see chatShadowed)
	for i := range c.Choices {
		ch := &c.Choices[i]
		r.AddOutput(ch.Delta.Content)
		r.AddReasoning(ch.Delta.ReasoningContent)
		r.AddReasoning(ch.Delta.Reasoning)
		r.AddOutput(ch.Message.Content)
		r.AddReasoning(ch.Message.ReasoningContent)
		r.AddReasoning(ch.Message.Reasoning)
		r.AddOutput(ch.Text)
		r.AddOutput(ch.Delta.Refusal)
		r.AddOutput(ch.Message.Refusal)
		for _, f := range [2]*function{ch.Delta.FunctionCall, ch.Message.FunctionCall} {
			if f != nil {
				r.AddOutput(f.Name)
				r.AddOutput(f.Arguments)
			}
		}
		for _, calls := range [2][]toolCall{ch.Delta.ToolCalls, ch.Message.ToolCalls} {
			for _, tc := range calls {
				r.AddOutput(tc.Function.Name)
				r.AddOutput(tc.Function.Arguments)
				if tc.Custom != nil {
					r.AddOutput(tc.Custom.Name)
					r.AddOutput(tc.Custom.Input)
				}
			}
		}
	}
	if len(c.Choices) > 0 {
		t.settled = false
	}
	if c.Usage != nil {
		if r.SetUsage(c.Usage.Meter()) {
			r.ReasoningOutside = c.Usage.ReasoningOutside()
		}
		if t.finished || len(c.Choices) == 0 && r.Output.Len() > 0 || c.Error != nil {
			r.MarkFinal()
		}
		t.settled = t.finished && len(c.Choices) == 0 && r.Output.Len() > 0 && c.Error == nil
		t.afterFinish = t.finished
	}
}
