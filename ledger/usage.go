package ledger

import (
	"context"
	"time"
)

// Usage groupings accepted by UsageQuery.GroupBy.
var usageGroups = map[string]string{
	"model": "model",
	"key":   "key_id::text",
	"hour":  "to_char(date_trunc('hour', occurred_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD\"T\"HH24:00:00\"Z\"')",
	"day":   "to_char(date_trunc('day', occurred_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')",
	"month": "to_char(date_trunc('month', occurred_at AT TIME ZONE 'UTC'), 'YYYY-MM')",
}

// UsageQuery selects usage events: one customer's (required), in
// [From, To) by event time, grouped by GroupBy: "model" (the default), "key",
// "hour", "day" or "month" (periods in UTC).
type UsageQuery struct {
	CustomerID string
	From, To   time.Time
	GroupBy    string
}

// UsageRow is one group's usage: token counts summed over Requests events,
// and their exact cost as a decimal string in Currency ("" for unpriced
// usage, whose cost is "0").
type UsageRow struct {
	Group            string `json:"group"`
	Model            string `json:"model,omitempty"`
	KeyID            string `json:"key_id,omitempty"`
	Period           string `json:"period,omitempty"`
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CachedTokens     int64  `json:"cached_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	ReasoningTokens  int64  `json:"reasoning_tokens"`
	Cost             string `json:"cost"`
	Currency         string `json:"currency"`
}

// Usage sums usage per group. It returns EInvalid for a missing customer id,
// an unknown grouping or an empty time range.
func (s *Store) Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	if q.GroupBy == "" {
		q.GroupBy = "model"
	}
	group, ok := usageGroups[q.GroupBy]
	switch {
	case !ok:
		return nil, errorf(EInvalid, "group_by: %q is not one of model, key, hour, day, month", q.GroupBy)
	case q.CustomerID == "":
		return nil, errorf(EInvalid, "customer_id is required")
	case !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To):
		return nil, errorf(EInvalid, "from must be before to")
	}
	from, to := q.From, q.To
	if from.IsZero() {
		from = time.Unix(0, 0)
	}
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+group+` AS g, currency, count(*), sum(prompt_tokens), sum(cached_tokens),
		  sum(cache_write_tokens), sum(completion_tokens), sum(reasoning_tokens), sum(cost_e12)::text
		FROM usage_events
		WHERE customer_id = $1 AND occurred_at >= $2 AND occurred_at < $3
		GROUP BY g, currency ORDER BY g, currency`, q.CustomerID, from, to)
	if err != nil {
		return nil, dbError(err, "usage")
	}
	defer rows.Close()
	out := []UsageRow{}
	for rows.Next() {
		var r UsageRow
		var cost string
		if err := rows.Scan(&r.Group, &r.Currency, &r.Requests, &r.PromptTokens, &r.CachedTokens,
			&r.CacheWriteTokens, &r.CompletionTokens, &r.ReasoningTokens, &cost); err != nil {
			return nil, dbError(err, "usage")
		}
		if r.Cost, err = FormatE12(cost); err != nil {
			return nil, err
		}
		switch q.GroupBy {
		case "model":
			r.Model = r.Group
		case "key":
			r.KeyID = r.Group
		default:
			r.Period = r.Group
		}
		out = append(out, r)
	}
	return out, dbError(rows.Err(), "usage")
}
