package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter"
)

// RatedEvent is a stored usage event with how it was rated.
type RatedEvent struct {
	meter.Event
	// PriceID is the price book's version in force (0: none); OverrideID
	// the customer's override used (0: none).
	PriceID    int64 `json:"price_id"`
	OverrideID int64 `json:"override_id,omitempty"`
	// Unpriced is true when no price was in force: the event is at cost 0.
	Unpriced bool `json:"unpriced"`
	// Cost is the exact cost at the price used; DiscountBP the override's
	// discount in basis points; Charge what the event was charged, exactly:
	// Cost × (10000 − DiscountBP) / 10000, as first rated (re-rating adds
	// entries, it does not change events). Decimal strings in Currency.
	Cost       string `json:"cost"`
	DiscountBP int    `json:"discount_bp"`
	Charge     string `json:"charge"`
	Currency   string `json:"currency"`
}

const selectEventColumns = `id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint, stream,
  status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens,
  completion_tokens, reasoning_tokens, web_search_requests, usage_source, ttft_ms,
  duration_ms, error, coalesce(price_id, 0), coalesce(override_id, 0), unpriced, currency, cost_e12::text,
  discount_bp, (cost_e12::numeric * (10000 - discount_bp) * 0.0001)::text`

func scanEvent(row pgx.Row) (RatedEvent, error) {
	var r RatedEvent
	e := &r.Event
	var cost, charge string
	err := row.Scan(
		&e.ID, &e.Time, &e.CustomerID, &e.KeyID, &e.Provider, &e.Model, &e.ServedModel, &e.Endpoint,
		&e.Stream, &e.Status, &e.HTTPStatus, &e.FinishReason, &e.Usage.PromptTokens,
		&e.Usage.CachedTokens, &e.Usage.CacheWriteTokens, &e.Usage.CompletionTokens,
		&e.Usage.ReasoningTokens, &e.Usage.WebSearchRequests, &e.UsageSource, &e.TTFTMillis,
		&e.DurationMillis, &e.Error, &r.PriceID, &r.OverrideID, &r.Unpriced, &r.Currency, &cost, &r.DiscountBP, &charge)
	if err != nil {
		return RatedEvent{}, err
	}
	e.Version = meter.SchemaVersion
	if r.Cost, err = FormatE12(cost); err != nil {
		return r, err
	}
	r.Charge, err = FormatE12(charge)
	return r, err
}

// Event returns the stored event with the given id, or ENotFound.
func (s *Store) Event(ctx context.Context, id string) (RatedEvent, error) {
	r, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+selectEventColumns+` FROM usage_events WHERE id = $1`, id))
	return r, dbError(err, "event "+id)
}

// RecentEvents returns a customer's latest events, newest first, at most
// limit (1 to 1000) of them.
func (s *Store) RecentEvents(ctx context.Context, customerID string, limit int) ([]RatedEvent, error) {
	if limit < 1 || limit > 1000 {
		return nil, errorf(EInvalid, "limit: %d is not between 1 and 1000", limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+selectEventColumns+` FROM usage_events
		WHERE customer_id = $1 ORDER BY occurred_at DESC, id DESC LIMIT $2`, customerID, limit)
	if err != nil {
		return nil, dbError(err, "events")
	}
	defer rows.Close()
	out := []RatedEvent{}
	for rows.Next() {
		r, err := scanEvent(rows)
		if err != nil {
			return nil, dbError(err, "events")
		}
		out = append(out, r)
	}
	return out, dbError(rows.Err(), "events")
}
