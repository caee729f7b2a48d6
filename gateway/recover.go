package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Recover turns the requests a gateway process left in its crash journal
// (it died mid-request) into their usage events, for the caller to make
// durable. A request whose final event was made but could not be made
// durable gets that event, as it was. Any other is recorded under its own
// id with status crashed and its usage estimated from what the journal
// holds, as a client that left mid-stream would be:
//
//   - the provider's last usage report, when it sent one (Anthropic's
//     message_start, Gemini's cumulative usageMetadata), with
//     completion_tokens raised to the tokenizer's count of the output
//     streamed up to the last checkpoint: source partial;
//   - otherwise the tokenizer's count of the prompt (from the journaled
//     body; a body longer than the journal keeps is estimated at 4 bytes a
//     token) and of that output: source estimated;
//   - either way, the reasoning the stream showed as text (journaled
//     apart) counted as reasoning tokens within the completion, as
//     tap.Report.Resolve counts it for a stream cut short;
//   - plus, when the stream showed no reasoning and the provider reported
//     none, the reasoning the model was seen to spend unseen (the average
//     of its recent requests on this gateway, as the journal recorded it
//     at the start);
//   - and nothing when the upstream had not answered yet.
//
// A late real event with the same id (one that was durable but whose end
// the journal missed) still counts once: the ledger keeps the first.
func (s *Server) Recover(reqs []journal.Request) []usage.Event {
	out := make([]usage.Event, 0, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if r.Final != nil {
			out = append(out, *r.Final)
			continue
		}
		e := r.Event
		hidden := e.Usage.ReasoningTokens
		// Journals of gateways before this one flagged the placeholder's
		// reasoning against no completion; Normalize below flags the
		// recovered usage itself.
		e.Corrections = usage.WithoutCorrection(e.Corrections, usage.CorrectionReasoningOverCompletion)
		e.Status, e.HTTPStatus, e.FinishReason = usage.StatusCrashed, 0, ""
		e.DurationMillis = max(r.Last.Sub(r.Began).Milliseconds(), e.TTFTMillis, 0)
		e.Error = fmt.Sprintf("the gateway process stopped mid-request (a crash or a kill); usage estimated from its last checkpoint, %d ms after the start",
			e.DurationMillis)
		if r.Checkpoints == 0 {
			e.Usage, e.UsageSource = usage.Tokens{}, usage.SourceEstimated
			e.Error = "the gateway process stopped before any output of the request was journaled (the upstream had not answered, " +
				"or its first output came within the journal's checkpoint delay of the stop); nothing billed"
			out = append(out, e)
			continue
		}
		e.HTTPStatus = http.StatusOK
		var rep tap.Report
		if r.Reported != nil {
			rep.SetUsage(*r.Reported)
		}
		rep.AddOutputBytes(r.Output) // after the report: its count may raise completion_tokens
		rep.Reasoning.Write(r.Reasoning)
		prompt := func() tap.Prompt { return s.promptOf(e.Endpoint, r) }
		e.Usage, e.UsageSource = rep.Resolve(s.est, prompt)
		if kept := len(r.Output); r.OutputLen > kept && kept > 0 {
			// The journal kept kept bytes of the output's OutputLen: the
			// tokenizer's count of them is scaled to the whole. The
			// provider's own count covers the whole already, and is not.
			scaled := s.est.Count(string(r.Output)) * int64(r.OutputLen) / int64(kept)
			var reported, reasoning int64
			if r.Reported != nil {
				reported, reasoning = r.Reported.CompletionTokens, r.Reported.ReasoningTokens
			}
			e.Usage.CompletionTokens = max(reported, scaled)
			if kept := len(r.Reasoning); r.ReasoningLen > kept && kept > 0 {
				// So is the reasoning shown, within the completion.
				shown := s.est.Count(string(r.Reasoning)) * int64(r.ReasoningLen) / int64(kept)
				e.Usage.ReasoningTokens = max(reasoning, min(shown, e.Usage.CompletionTokens))
			}
		}
		if r.BodyLen <= len(r.Body) && hidden > 0 { // the request's own settings, as estimate reads them
			if reasoningEffort(r.Body, e.Endpoint) == effortOff {
				hidden = 0
			}
			if limit, ok := statedOutputLimit(r.Body, e.Endpoint); ok {
				// Begin journaled it against no output yet: within the
				// request's output limit, the output counted takes its share.
				hidden = min(hidden, limit-e.Usage.CompletionTokens)
			}
		}
		if !r.ReasoningShown && e.Usage.ReasoningTokens == 0 && hidden > 0 {
			e.Usage.CompletionTokens += hidden
			e.Usage.ReasoningTokens = hidden
			e.Error += fmt.Sprintf("; %d reasoning tokens the model hides estimated from recent averages", hidden)
		}
		e.Normalize()
		out = append(out, e)
	}
	return out
}

// promptOf is the prompt of a journaled request, read from its body by its
// endpoint's route; a body the journal cut short is estimated at 4 bytes
// a token.
func (s *Server) promptOf(endpoint string, r *journal.Request) tap.Prompt {
	if r.BodyLen > len(r.Body) {
		return tap.Prompt{Tokens: int64(r.BodyLen / 4)}
	}
	if endpoint == "/v1/chat/completions" {
		req, err := parseChatRequest(r.Body)
		if err != nil {
			return tap.Prompt{}
		}
		return chatPromptText(req.fields["messages"], chatDefs(req.fields)...)
	}
	for _, p := range s.providers {
		for _, rt := range p.Routes {
			if prefix := strings.TrimSuffix(rt.Pattern, "*"); strings.HasPrefix(endpoint, prefix) && rt.PromptText != nil {
				return rt.PromptText(r.Body)
			}
		}
	}
	return tap.Prompt{}
}
