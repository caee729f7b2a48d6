package main

import (
	"context"
	"fmt"
	"time"
)

// crashParts splits what the crashed events of a kill phase hold, and what
// upstream-sim billed for the same requests, by where the estimate comes
// from, in tokens. A stream cut short is billed its prompt and its
// reasoning in full (they precede the content) plus the content written,
// so for each crashed request whose client saw its X-Request-Id the first
// two are known from its body; the content is the rest of the phase's
// in-flight truth.
type crashParts struct {
	prompt, reasoning, content    [2]int64 // [0] the crashed events, [1] upstream-sim
	nothing                       int      // unanswered crashed events (see ledgerParts): nothing billed
	nothingAtMost                 int64    // what upstream-sim bills those at most: prompt and reasoning, if it opened their streams
	unknown                       int      // crashed events whose client never saw an id (killed before the headers)
	unknownPrompt, unknownContent int64    // what those hold
}

// crashBreakdown explains a kill phase's unbilled share (see crashParts).
func (s *stack) crashBreakdown(ctx context.Context, rw *row, r *run, from, to time.Time) (string, error) {
	rows, err := s.db.Query(ctx, `SELECT id::text, prompt_tokens, completion_tokens, reasoning_tokens
		FROM usage_events WHERE customer_id = $1 AND status = 'crashed' AND occurred_at >= $2 AND occurred_at <= $3`,
		s.customer, from, to)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var p crashParts
	r.mu.Lock()
	defer r.mu.Unlock()
	for rows.Next() {
		var id string
		var prompt, completion, reasoning int64
		if err := rows.Scan(&id, &prompt, &completion, &reasoning); err != nil {
			return "", err
		}
		want, known := r.expected[id]
		switch {
		case prompt == 0 && completion == 0: // unanswered (see ledgerParts)
			p.nothing++
			p.nothingAtMost += want.PromptTokens + want.ReasoningTokens
		case !known:
			p.unknown++
			p.unknownPrompt, p.unknownContent = p.unknownPrompt+prompt, p.unknownContent+completion
		default:
			p.prompt[0], p.prompt[1] = p.prompt[0]+prompt, p.prompt[1]+want.PromptTokens
			p.reasoning[0], p.reasoning[1] = p.reasoning[0]+reasoning, p.reasoning[1]+want.ReasoningTokens
			p.content[0] += completion - reasoning
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	p.content[1] = rw.truth - p.prompt[1] - p.reasoning[1]
	return fmt.Sprintf("the crashed events hold, against what upstream-sim billed: prompt %d of %d, reasoning %d of %d, "+
		"content %d of the remaining %d; %d with nothing billed as the journal had no answer from the upstream (upstream-sim billed them 0 to %d), "+
		"%d whose client never saw an id (holding %d prompt, %d completion)",
		p.prompt[0], p.prompt[1], p.reasoning[0], p.reasoning[1], p.content[0], p.content[1], p.nothing, p.nothingAtMost, p.unknown,
		p.unknownPrompt, p.unknownContent), nil
}
