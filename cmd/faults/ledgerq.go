package main

import (
	"context"
	"time"
)

// ledgerTally sums the load customer's ledger events that occurred in
// [from, to] (zero times: no bound), leaving out the events in exclude
// (poison, checked one by one). The attempts not charged (failed and
// retried on another deployment, in usage_attempts) count as events:
// upstream-sim saw each of them.
func (s *stack) ledgerTally(ctx context.Context, from, to time.Time, exclude ...string) (tally, error) {
	p, err := s.ledgerSplit(ctx, from, to, exclude)
	return p.all, err
}

// ledgerParts is a ledgerTally and its crashed part.
type ledgerParts struct {
	all     tally
	crashed tally // events recovered from a crash journal (status crashed)
	// unanswered counts the crashed events with nothing billed: the
	// gateway died before the upstream answered. Such a request may have
	// died before its bytes reached the upstream too; the gateway cannot
	// tell (it journals a request just before it sends it), nor can the
	// suite (upstream-sim counts only requests it received).
	unanswered int64
}

// ledgerSplit is ledgerTally, split (see ledgerParts).
func (s *stack) ledgerSplit(ctx context.Context, from, to time.Time, exclude []string) (ledgerParts, error) {
	var p ledgerParts
	if to.IsZero() {
		to = time.Now().Add(24 * time.Hour)
	}
	if exclude == nil {
		exclude = []string{} // NULL would exclude every row
	}
	rows, err := s.db.Query(ctx, `SELECT CASE WHEN status <> 'crashed' THEN 0 WHEN prompt_tokens = 0 AND completion_tokens = 0 THEN 2 ELSE 1 END,
		count(*), coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(cached_tokens), 0)::bigint,
		coalesce(sum(completion_tokens), 0)::bigint, coalesce(sum(reasoning_tokens), 0)::bigint
		FROM (SELECT id, status, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, customer_id, occurred_at
		  FROM usage_events
		  UNION ALL
		  SELECT id, status, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, customer_id, occurred_at
		  FROM usage_attempts) e
		WHERE customer_id = $3 AND occurred_at >= $1 AND occurred_at <= $2 AND id <> ALL($4::uuid[])
		GROUP BY 1`, from, to, s.customer, exclude)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	for rows.Next() {
		var class int
		var t tally
		if err := rows.Scan(&class, &t.requests, &t.prompt, &t.cached, &t.completion, &t.reasoning); err != nil {
			return p, err
		}
		p.all = p.all.add(t)
		if class > 0 {
			p.crashed = p.crashed.add(t)
		}
		if class == 2 {
			p.unanswered = t.requests
		}
	}
	return p, rows.Err()
}

// requestGap is how far the ledger's event count is from upstream-sim's
// request count: every request upstream-sim saw must have one event, and
// only unanswered crashed events (see ledgerParts) may stand for requests
// it never saw.
func requestGap(sim int64, p ledgerParts) int64 {
	switch {
	case sim > p.all.requests:
		return sim - p.all.requests
	case sim < p.all.requests-p.unanswered:
		return p.all.requests - p.unanswered - sim
	}
	return 0
}

// missing returns the ids of ids that have no event in the ledger; an
// empty id (an answer without X-Request-Id) is missing as "(none)".
func (s *stack) missing(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "" {
			out = append(out, "(none)")
		} else {
			valid = append(valid, id)
		}
	}
	rows, err := s.db.Query(ctx, `SELECT c.id::text FROM unnest($1::uuid[]) AS c(id)
		WHERE NOT EXISTS (SELECT 1 FROM usage_events e WHERE e.id = c.id)`, valid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
