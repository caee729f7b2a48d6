// Package tap holds what the gateway learns about one upstream response's
// usage, whatever the provider's wire format, and turns it into the figures
// the usage event records: the provider's own when it reported them, a
// tokenizer estimate when it did not (flagged), never a guess passed off as
// the provider's.
package tap

import (
	"math"
	"strings"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Report is filled in by a protocol's tap as the upstream response goes by.
// Taps set fields; they never sum cumulative counters (each report of the
// provider replaces the last, field by field as the protocol defines).
type Report struct {
	// Usage is the provider's latest usage report, normalized (see
	// usage.Tokens for what each field includes).
	Usage usage.Tokens
	// Reported is true once the provider reported any usage at all.
	Reported bool
	// Final is true once the provider's final usage report arrived: OpenAI's
	// usage chunk after output (or usage on/after the finish chunk), Anthropic's
	// message_delta, Gemini's chunk with a finishReason, the Responses API's
	// response.completed (or failed/incomplete with usage).
	Final bool
	// Cumulative is set by a tap whose provider reports usage on every
	// chunk, counting all so far, and may send more after a final report
	// (Gemini: Vertex AI puts a finishReason on every chunk): its relay
	// reads the stream to its end and makes the event durable there, not
	// at Final, so that the last report is the one billed.
	Cumulative bool
	// Ended is true once the provider's stream said it is over: Anthropic's
	// message_stop, the Responses API's response.completed (or
	// response.incomplete, response.failed). The relay reads nothing after it, so that an upstream
	// that holds its body open after its end does not hold the client.
	Ended bool
	// Reports counts the final usage reports a stream's tap has read
	// (MarkFinal's calls): a relay that holds one back learns from it
	// whether the next event reported again (Anthropic documents "one or
	// more message_delta events", each cumulative).
	Reports int
	// FinishReason is the finish reason in OpenAI's terms: "stop", "length",
	// "tool_calls", "content_filter" (or "error" for a stream that failed).
	FinishReason string
	// ServedModel is the model the provider said it served.
	ServedModel string
	// Error describes an upstream error frame, if one arrived.
	Error string
	// Began is kept by a stream's relay (see StreamEvent): a data event
	// arrived (OpenAI's role chunk, say) and no error frame: the provider
	// accepted the request and began its answer, so its prompt is billed
	// if the stream then breaks or stalls before any output (see Resolve).
	// An error frame of the provider's, before any output, is its refusal
	// (the Responses API's insufficient_quota after response.created, say:
	// recorded, nothing billed), and clears it.
	Began bool
	// Output collects the text the provider produced: content, reasoning or
	// thinking, tool call names and arguments. It is what a tokenizer
	// estimate counts when the provider's figures are missing or partial.
	// Error text is never added.
	Output strings.Builder
	// ReasoningOutside is set with the latest usage report (by the OpenAI
	// taps) when that report counted its reasoning apart from its
	// completion_tokens, which Usage then includes (see
	// usage.CorrectionReasoningOutsideCompletion): the report, as the
	// provider wrote it, is not what is billed.
	ReasoningOutside bool
	// ReasoningShown is true once the provider streamed reasoning as text
	// (OpenAI-compatible reasoning_content, Anthropic's thinking, Gemini's
	// thought parts), which Output then holds: the reasoning tokens it
	// reports are not hidden from an estimate.
	ReasoningShown bool
	// Reasoning collects the reasoning the provider showed as text, which
	// Output holds too: an estimate counts it as reasoning_tokens, within
	// completion_tokens (see Resolve).
	Reasoning strings.Builder
	// AmbiguousUsage is set by a tap whose latest usage report spells its
	// usage member, or a count it reads, otherwise than exactly once
	// (AmbiguousUsage): the tap billed what encoding/json read, which a
	// client's SDK may read otherwise, so the answer is to carry the usage
	// billed rather than the report as the provider wrote it.
	AmbiguousUsage bool
	// OutputFloored is set by Resolve when the provider's final report
	// counted no completion tokens though output was relayed, and the
	// completion is the tokenizer's count: the report said nothing of the
	// reasoning either (see the gateway's hidden-reasoning estimate). A
	// report so far (a stream cut short) does not set it: it may count no
	// output yet, and its reasoning as far as it went.
	OutputFloored bool
	// outputAt is Output's length when usage was last set (see SetUsage).
	outputAt int
	// finalAt is Output's length when a stream's report became final
	// (MarkFinal), and streamFinal whether one did: output past both it
	// and outputAt came after the provider's final count.
	finalAt     int
	streamFinal bool
}

// AddOutput records produced text for estimation.
func (r *Report) AddOutput(s string) { r.Output.WriteString(s) }

// AddReasoning records reasoning the provider showed as text, for
// estimation (see ReasoningShown).
func (r *Report) AddReasoning(s string) {
	if s != "" {
		r.Output.WriteString(s)
		r.Reasoning.WriteString(s)
		r.ReasoningShown = true
	}
}

// AddReasoningBytes records reasoning the provider showed as text, like
// AddReasoning.
func (r *Report) AddReasoningBytes(b []byte) {
	if len(b) > 0 {
		r.Output.Write(b)
		r.Reasoning.Write(b)
		r.ReasoningShown = true
	}
}

// AddOutputBytes records produced text for estimation, like AddOutput.
func (r *Report) AddOutputBytes(b []byte) { r.Output.Write(b) }

// SetUsage records a usage report of the provider: it replaces the last
// one (reports are cumulative) and marks Reported. Taps should call it
// rather than set Usage, so that Resolve knows what output came after: a
// report counts the output before it only when it is the first or counts
// more completion tokens than the last (a report repeated, or lowered,
// after output, such as a second Anthropic message_start, does not make
// that output counted).
//
// A report that counts nothing (every count 0 or less: `"usage":{}`, or
// zeros, as some proxies append after the provider's own) after one that
// counted something is not taken, and SetUsage returns false: taken as the
// last report, it replaced the provider's figures, and the stream was
// billed the estimate of its streamed text (2 tokens of a 500-token
// answer, in a review).
func (r *Report) SetUsage(u usage.Tokens) bool {
	if r.Reported && countsNothing(u) && !countsNothing(r.Usage) {
		return false
	}
	if !r.Reported || u.CompletionTokens > r.Usage.CompletionTokens {
		r.outputAt = r.Output.Len()
	}
	r.Usage, r.Reported = u, true
	return true
}

// countsNothing reports whether every count of u is 0 or less.
func countsNothing(u usage.Tokens) bool {
	return u.PromptTokens <= 0 && u.CachedTokens <= 0 && u.CacheWriteTokens <= 0 && u.CompletionTokens <= 0 &&
		u.ReasoningTokens <= 0 && u.WebSearchRequests <= 0
}

// Lowers reports whether any count of u is below the same count of was: a
// cumulative report never lowers one (Anthropic's message_delta), so one
// that does, after a final report, is not the provider's later figure.
func Lowers(u, was usage.Tokens) bool {
	return u.PromptTokens < was.PromptTokens || u.CachedTokens < was.CachedTokens ||
		u.CacheWriteTokens < was.CacheWriteTokens || u.CompletionTokens < was.CompletionTokens ||
		u.ReasoningTokens < was.ReasoningTokens || u.WebSearchRequests < was.WebSearchRequests
}

// StreamEvent keeps Began after the relay has tapped one stream event:
// data is whether the event carried data.
func (r *Report) StreamEvent(data bool) {
	r.Began = (r.Began || data) && r.Error == ""
}

// MarkFinal records that the provider's final usage report arrived, in a
// stream, with the output so far; it sets Final. Stream taps call it
// rather than set Final, so that Resolve knows what output came after the
// report (a whole body's output is read after its usage: its taps set
// Final).
func (r *Report) MarkFinal() {
	if !r.Final || !r.streamFinal {
		r.finalAt, r.streamFinal = r.Output.Len(), true
	}
	r.Final = true
	r.Reports++
}

// lateOutput reports whether output arrived after a stream's final report
// and after the last usage report: output the provider's figures do not
// count.
func (r *Report) lateOutput() bool {
	return r.streamFinal && r.Output.Len() > max(r.finalAt, r.outputAt)
}

// late is the output lateOutput reports.
func (r *Report) late() string {
	return r.Output.String()[max(r.finalAt, r.outputAt):]
}

// Prompt is what an estimate of a request's prompt counts: its text, how
// many chat messages it holds (0 when it is not a list of messages), and
// Media, the tokens of its parts that are not text (images), counted by
// the caller; or, when Tokens is set, that estimate itself.
type Prompt struct {
	Text string
	// Texts are counted each on its own and added to Text's count: an
	// embeddings input array, each of whose strings the provider reads
	// alone (joined, each newline between them counted a token more).
	Texts    []string
	Messages int
	Media    int64
	Tokens   int64
}

// Resolve returns the usage to record and its usage_source, given the
// request's prompt (for an estimate when the provider reported none;
// prompt is called only then, as extracting it costs a decode):
//
//   - Final: the provider's figures as sent; source "upstream". But when
//     output went on after a stream's final report (an upstream that
//     reports, then streams more), the tokenizer's count of that output
//     is added to completion_tokens (not compared with it: the report's
//     count may hold reasoning the stream never showed); source
//     "partial".
//   - Reported but not final (the stream ended early): the provider's
//     figures; if output arrived after its last report, completion_tokens
//     is raised to the tokenizer's count of all the output seen when that
//     is larger; source "partial". (A provider that reports cumulative
//     usage with every chunk has counted all the output itself.)
//   - Either, when the report counts no completion tokens (none, or a
//     negative count) though output reached the client, or no prompt
//     tokens though the provider produced output: a report that cannot be
//     the provider's bill (a usage object with its counts missing or
//     misnamed, "usage":{}). What it lacks is estimated; source "partial".
//     Other figures stand as sent (reasoning above completion included).
//   - Not reported, and the upstream failed before its stream began (no
//     event but errors) and without producing any output: nothing is
//     billed (zero tokens); source "estimated". Once it began, the prompt
//     is estimated, as below, though the output is none.
//   - Not reported otherwise: prompt and completion both estimated with
//     the tokenizer (see Estimator.Prompt); source "estimated".
//
// Whenever the completion is the tokenizer's count of the output, the
// reasoning the provider showed as text (Reasoning) is counted as
// reasoning_tokens within it, unless the provider's report counted more:
// a stream cut short after its reasoning bills it as reasoning.
func (r *Report) Resolve(est *Estimator, prompt func() Prompt) (usage.Tokens, usage.Source) {
	switch {
	case !r.Reported && r.Error != "" && r.Output.Len() == 0 && !r.Began:
		return usage.Tokens{}, usage.SourceEstimated
	case r.Final:
		if u, floored := r.floor(est, prompt); floored {
			// A final report that counted no output said nothing of the
			// reasoning either; a report so far (below) may count none yet.
			r.OutputFloored = u.CompletionTokens != r.Usage.CompletionTokens
			return u, usage.SourcePartial
		}
		if r.lateOutput() {
			if n := est.Count(r.late()); n > 0 {
				u := r.Usage
				u.CompletionTokens = sat(u.CompletionTokens, n)
				return u, usage.SourcePartial
			}
		}
		return r.Usage, usage.SourceUpstream
	case r.Reported:
		u, _ := r.floor(est, prompt) // a completion floored counts all the output already
		if r.Output.Len() > r.outputAt && u.CompletionTokens == r.Usage.CompletionTokens {
			if n := est.Count(r.Output.String()); n > u.CompletionTokens {
				u.CompletionTokens = n
				r.shownReasoning(est, &u)
			}
		}
		return u, usage.SourcePartial
	default:
		u := usage.Tokens{
			PromptTokens:     est.Prompt(prompt()),
			CompletionTokens: est.Count(r.Output.String()),
		}
		r.shownReasoning(est, &u)
		return u, usage.SourceEstimated
	}
}

// shownReasoning raises u's reasoning_tokens, whose completion_tokens is
// the tokenizer's count of the output, to the tokenizer's count of the
// reasoning shown as text, at most the completion.
func (r *Report) shownReasoning(est *Estimator, u *usage.Tokens) {
	if r.Reasoning.Len() == 0 {
		return
	}
	u.ReasoningTokens = max(u.ReasoningTokens, min(est.Count(r.Reasoning.String()), u.CompletionTokens))
}

// floor returns r.Usage with what it cannot lack estimated (see Resolve):
// completion tokens when it counts none though output was relayed, prompt
// tokens when it counts none though the provider produced output; and
// whether it estimated either.
func (r *Report) floor(est *Estimator, prompt func() Prompt) (usage.Tokens, bool) {
	u, floored := r.Usage, false
	if u.CompletionTokens <= 0 && r.Output.Len() > 0 {
		if n := est.Count(r.Output.String()); n > 0 {
			u.CompletionTokens, floored = n, true
			r.shownReasoning(est, &u)
		}
	}
	if u.PromptTokens <= 0 && u.CompletionTokens > 0 {
		if n := est.Prompt(prompt()); n > 0 {
			u.PromptTokens, floored = n, true
		}
	}
	return u, floored
}

// Text returns a prompt function for Resolve: the text s, no messages.
func Text(s string) func() Prompt { return func() Prompt { return Prompt{Text: s} } }

// sat is a + b, saturating at math.MaxInt64 (a and b not negative).
func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
