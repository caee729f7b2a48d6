// Package usage holds what the gateway learns about one upstream response's
// usage, whatever the provider's wire format, and turns it into the figures
// the usage event records: the provider's own when it reported them, a
// tokenizer estimate when it did not (flagged), never a guess passed off as
// the provider's.
package usage

import (
	"strings"

	"github.com/tollgate-dev/tollgate/meter"
)

// Report is filled in by a protocol's tap as the upstream response goes by.
// Taps set fields; they never sum cumulative counters (each report of the
// provider replaces the last, field by field as the protocol defines).
type Report struct {
	// Usage is the provider's latest usage report, normalized (see
	// meter.Usage for what each field includes).
	Usage meter.Usage
	// Reported is true once the provider reported any usage at all.
	Reported bool
	// Final is true once the provider's final usage report arrived: OpenAI's
	// usage chunk (or usage on/after the finish chunk), Anthropic's
	// message_delta, Gemini's chunk with a finishReason, the Responses API's
	// response.completed (or failed/incomplete with usage).
	Final bool
	// FinishReason is the finish reason in OpenAI's terms: "stop", "length",
	// "tool_calls", "content_filter" (or "error" for a stream that failed).
	FinishReason string
	// ServedModel is the model the provider said it served.
	ServedModel string
	// Error describes an upstream error frame, if one arrived.
	Error string
	// Output collects the text the provider produced: content, reasoning or
	// thinking, tool call names and arguments. It is what a tokenizer
	// estimate counts when the provider's figures are missing or partial.
	// Error text is never added.
	Output strings.Builder
	// outputAt is Output's length when usage was last set (see SetUsage).
	outputAt int
}

// AddOutput records produced text for estimation.
func (r *Report) AddOutput(s string) { r.Output.WriteString(s) }

// AddOutputBytes records produced text for estimation, like AddOutput.
func (r *Report) AddOutputBytes(b []byte) { r.Output.Write(b) }

// SetUsage records a usage report of the provider: it replaces the last
// one (reports are cumulative) and marks Reported. Taps should call it
// rather than set Usage, so that Resolve knows what output came after.
func (r *Report) SetUsage(u meter.Usage) {
	r.Usage, r.Reported, r.outputAt = u, true, r.Output.Len()
}

// Resolve returns the usage to record and its usage_source, given the
// request's prompt text (for an estimate when the provider reported none;
// prompt is called only then, as extracting it costs a decode):
//
//   - Final: the provider's figures as sent; source "upstream".
//   - Reported but not final (the stream ended early): the provider's
//     figures; if output arrived after its last report, completion_tokens
//     is raised to the tokenizer's count of all the output seen when that
//     is larger; source "partial". (A provider that reports cumulative
//     usage with every chunk has counted all the output itself.)
//   - Not reported, and the upstream failed without producing any output:
//     nothing is billed (zero tokens); source "estimated".
//   - Not reported otherwise: prompt and completion both estimated with
//     the tokenizer; source "estimated".
func (r *Report) Resolve(est *Estimator, prompt func() string) (meter.Usage, string) {
	switch {
	case !r.Reported && r.Error != "" && r.Output.Len() == 0:
		return meter.Usage{}, meter.SourceEstimated
	case r.Final:
		return r.Usage, meter.SourceUpstream
	case r.Reported:
		u := r.Usage
		if r.Output.Len() > r.outputAt {
			u.CompletionTokens = max(u.CompletionTokens, est.Count(r.Output.String()))
		}
		return u, meter.SourcePartial
	default:
		return meter.Usage{
			PromptTokens:     est.Count(prompt()),
			CompletionTokens: est.Count(r.Output.String()),
		}, meter.SourceEstimated
	}
}

// Text returns a prompt function for Resolve that returns s.
func Text(s string) func() string { return func() string { return s } }
