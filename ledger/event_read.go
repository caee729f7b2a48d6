package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// RatedEvent is a stored usage event with how it was rated.
type RatedEvent struct {
	usage.Event
	// PriceID is the price book's version in force (0: none); OverrideID
	// the customer's override used (0: none).
	PriceID    int64 `json:"price_id"`
	OverrideID int64 `json:"override_id,omitempty"`
	// Unpriced is true when no price was in force when the event was
	// stored: it was stored at list cost 0 (a later re-rating may have
	// priced it: see Cost).
	Unpriced bool `json:"unpriced"`
	// ListCost is the exact cost at the price used, before any discount;
	// DiscountBP the override's discount in basis points; Charge what the
	// event was charged when rated: ListCost × (10000 − DiscountBP) /
	// 10000. Re-rating never changes those (it adds entries). Cost is what
	// the customer is charged for the event, as everywhere in the API:
	// after overrides, discounts and any re-rating (Charge less its rerate
	// entries). Decimal strings in Currency, the currency of Cost (for an
	// event priced only by re-rating, the re-rating's).
	ListCost   string `json:"list_cost"`
	DiscountBP int    `json:"discount_bp"`
	Charge     string `json:"charge"`
	Cost       string `json:"cost"`
	Currency   string `json:"currency"`
	// Rerated is true when a re-rating has charged the event anew (it has
	// rerate entries): its Cost is then what the re-ratings made it, which
	// may differ from Charge (or not: a 100% discount moves only the list
	// cost, and a price changed and changed back nets to nothing), and an
	// event Unpriced when stored may have a Cost.
	Rerated bool `json:"rerated"`
}

// selectEvents reads events (as e) with their rerate entries (as r).
const selectEvents = `SELECT e.id, e.occurred_at, e.customer_id, e.key_id, e.provider, e.model, e.served_model,
  e.endpoint, e.stream, e.status, e.http_status, e.finish_reason, e.prompt_tokens, e.cached_tokens,
  e.cache_write_tokens, e.completion_tokens, e.reasoning_tokens, e.web_search_requests, e.usage_source,
  e.ttft_ms, e.duration_ms, e.error, e.corrections, e.end_user, e.metadata, e.deployment, e.attempt, coalesce(e.price_id, 0), coalesce(e.override_id, 0), e.unpriced,
  coalesce(r.currency, e.currency), e.cost_e12::text, e.discount_bp,
  (e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001)::text,
  (e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001 - coalesce(r.amount, 0))::text, r.n > 0
FROM usage_events e LEFT JOIN LATERAL (SELECT max(currency) AS currency, sum(amount_e12) AS amount, count(*) AS n
  FROM ledger_entries WHERE event_id = e.id AND kind = 'rerate') r ON true `

func scanEvent(row pgx.Row) (RatedEvent, error) {
	var r RatedEvent
	e := &r.Event
	var listCost, charge, cost string
	err := row.Scan(
		&e.ID, &e.Time, &e.CustomerID, &e.KeyID, &e.Provider, &e.Model, &e.ServedModel, &e.Endpoint,
		&e.Stream, &e.Status, &e.HTTPStatus, &e.FinishReason, &e.Usage.PromptTokens,
		&e.Usage.CachedTokens, &e.Usage.CacheWriteTokens, &e.Usage.CompletionTokens,
		&e.Usage.ReasoningTokens, &e.Usage.WebSearchRequests, &e.UsageSource, &e.TTFTMillis,
		&e.DurationMillis, &e.Error, &e.Corrections, &e.EndUser, &e.Metadata, &e.Deployment, &e.Attempt, &r.PriceID, &r.OverrideID, &r.Unpriced, &r.Currency, &listCost, &r.DiscountBP,
		&charge, &cost, &r.Rerated)
	if err != nil {
		return RatedEvent{}, err
	}
	e.Version = usage.SchemaVersion
	for _, m := range []struct {
		dst *string
		e12 string
	}{{&r.ListCost, listCost}, {&r.Charge, charge}, {&r.Cost, cost}} {
		if *m.dst, err = FormatE12(m.e12); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Event returns the stored event with the given id, or ENotFound.
func (s *Store) Event(ctx context.Context, id string) (RatedEvent, error) {
	r, err := scanEvent(s.pool.QueryRow(ctx, selectEvents+`WHERE e.id = $1`, id))
	return r, dbError(err, "event "+id)
}

// RecentEvents returns a customer's latest events, newest first, at most
// limit (1 to 1000) of them.
func (s *Store) RecentEvents(ctx context.Context, customerID string, limit int) ([]RatedEvent, error) {
	if limit < 1 || limit > 1000 {
		return nil, errorf(EInvalid, "limit: %d is not between 1 and 1000", limit)
	}
	rows, err := s.pool.Query(ctx, selectEvents+`
		WHERE e.customer_id = $1 ORDER BY e.occurred_at DESC, e.id DESC LIMIT $2`, customerID, limit)
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
