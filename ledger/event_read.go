package ledger

import (
	"context"

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

// Event returns the stored event with the given id, or ENotFound.
func (s *Store) Event(ctx context.Context, id string) (RatedEvent, error) {
	var r RatedEvent
	e := &r.Event
	var priceID *int64
	var cost string
	err := s.pool.QueryRow(ctx, `
		SELECT id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint, stream,
		  status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens,
		  completion_tokens, reasoning_tokens, web_search_requests, usage_source, ttft_ms,
		  duration_ms, error, price_id, currency, cost_e12::text
		FROM usage_events WHERE id = $1`, id).Scan(
		&e.ID, &e.Time, &e.CustomerID, &e.KeyID, &e.Provider, &e.Model, &e.ServedModel, &e.Endpoint,
		&e.Stream, &e.Status, &e.HTTPStatus, &e.FinishReason, &e.Usage.PromptTokens,
		&e.Usage.CachedTokens, &e.Usage.CacheWriteTokens, &e.Usage.CompletionTokens,
		&e.Usage.ReasoningTokens, &e.Usage.WebSearchRequests, &e.UsageSource, &e.TTFTMillis,
		&e.DurationMillis, &e.Error, &priceID, &r.Currency, &cost)
	if err != nil {
		return RatedEvent{}, dbError(err, "event "+id)
	}
	e.Version = meter.SchemaVersion
	if priceID != nil {
		r.PriceID = *priceID
	}
	r.Cost, err = FormatE12(cost)
	return r, err
}
