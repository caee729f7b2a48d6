package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter"
)

// RatedEvent is a stored usage event with how it was rated.
type RatedEvent struct {
	meter.Event
	// PriceID is the price version used; 0 means unpriced (cost 0).
	PriceID int64 `json:"price_id"`
	// Cost is the exact cost as a decimal string in Currency.
	Cost     string `json:"cost"`
	Currency string `json:"currency"`
}

const selectEventColumns = `id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint, stream,
  status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens,
  completion_tokens, reasoning_tokens, web_search_requests, usage_source, ttft_ms,
  duration_ms, error, price_id, currency, cost_e12::text`

func scanEvent(row pgx.Row) (RatedEvent, error) {
	var r RatedEvent
	e := &r.Event
	var priceID *int64
	var cost string
	err := row.Scan(
		&e.ID, &e.Time, &e.CustomerID, &e.KeyID, &e.Provider, &e.Model, &e.ServedModel, &e.Endpoint,
		&e.Stream, &e.Status, &e.HTTPStatus, &e.FinishReason, &e.Usage.PromptTokens,
		&e.Usage.CachedTokens, &e.Usage.CacheWriteTokens, &e.Usage.CompletionTokens,
		&e.Usage.ReasoningTokens, &e.Usage.WebSearchRequests, &e.UsageSource, &e.TTFTMillis,
		&e.DurationMillis, &e.Error, &priceID, &r.Currency, &cost)
	if err != nil {
		return RatedEvent{}, err
	}
	e.Version = meter.SchemaVersion
	if priceID != nil {
		r.PriceID = *priceID
	}
	r.Cost, err = FormatE12(cost)
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
