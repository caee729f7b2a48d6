package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// rollupAdd adds a row's figures to the usage_hourly row it conflicts with.
const rollupAdd = `ON CONFLICT (customer_id, hour, key_id, model, currency) DO UPDATE SET
    requests = usage_hourly.requests + EXCLUDED.requests,
    unpriced_requests = usage_hourly.unpriced_requests + EXCLUDED.unpriced_requests,
    prompt_tokens = usage_hourly.prompt_tokens + EXCLUDED.prompt_tokens,
    cached_tokens = usage_hourly.cached_tokens + EXCLUDED.cached_tokens,
    cache_write_tokens = usage_hourly.cache_write_tokens + EXCLUDED.cache_write_tokens,
    completion_tokens = usage_hourly.completion_tokens + EXCLUDED.completion_tokens,
    reasoning_tokens = usage_hourly.reasoning_tokens + EXCLUDED.reasoning_tokens,
    web_search_requests = usage_hourly.web_search_requests + EXCLUDED.web_search_requests,
    cost_e12 = usage_hourly.cost_e12 + EXCLUDED.cost_e12,
    charge_e12 = usage_hourly.charge_e12 + EXCLUDED.charge_e12`

// writeBatch stores a rated batch in one statement: it claims each id in
// event_ids (the dedupe key across partitions), inserts only the events
// whose ids were new, adds them to the hourly rollups and the customers'
// balances, moves the keys' last-used times forward, and counts the
// duplicates refused. Its result is the number of new events and how many
// of them are unpriced. The batch comes as 35 arrays, one per column
// (see eventColumns); writeStaged is the same from a staging table.
//
// An attempt not charged (usage.Event.NotCharged: failed before the
// client's first byte and retried elsewhere) goes to usage_attempts
// instead of usage_events, and so moves no rollup, balance or spend.
const writeBatch = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::text[], $6::text[],
    $7::text[], $8::text[], $9::boolean[], $10::text[], $11::integer[], $12::text[], $13::bigint[],
    $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::text[],
    $20::bigint[], $21::bigint[], $22::text[], $23::bigint[], $24::bigint[], $25::text[], $26::bigint[],
    $27::integer[], $28::boolean[], $29::text[], $30::text[], $31::text[]::jsonb[], $32::text[], $33::integer[],
    $34::boolean[], $35::uuid[])
  AS t(` + eventColumnList + `, deployment, attempt, charged, request_id)
), claimed AS (
  INSERT INTO event_ids (id, occurred_at) SELECT id, occurred_at FROM input
  ON CONFLICT (id) DO NOTHING RETURNING id
), attempts AS (
  INSERT INTO usage_attempts (id, occurred_at, request_id, customer_id, key_id, provider, deployment, model,
    endpoint, stream, attempt, status, http_status, prompt_tokens, cached_tokens, cache_write_tokens,
    completion_tokens, reasoning_tokens, web_search_requests, usage_source, duration_ms, error, corrections)
  SELECT id, occurred_at, request_id, customer_id, key_id, provider, deployment, model,
    endpoint, stream, attempt, status, http_status, prompt_tokens, cached_tokens, cache_write_tokens,
    completion_tokens, reasoning_tokens, web_search_requests, usage_source, duration_ms, error, corrections
  FROM input JOIN claimed USING (id) WHERE NOT charged
), ins AS (
  INSERT INTO usage_events (` + eventColumnList + `, deployment, attempt)
  SELECT ` + eventColumnList + `, deployment, attempt FROM input JOIN claimed USING (id) WHERE charged
  ` + batchEffects + `
), counted AS (
  INSERT INTO ingest_counters (name, value)
  SELECT 'duplicates', d FROM (SELECT $36::bigint + (SELECT count(*) FROM input) - (SELECT count(*) FROM claimed)) AS x(d)
  WHERE d > 0
  ON CONFLICT (name) DO UPDATE SET value = ingest_counters.value + EXCLUDED.value
)
SELECT (SELECT count(*) FROM claimed), (SELECT count(*) FROM ins WHERE unpriced)`

// eventColumnList is the columns of usage_events a batch writes, in the
// order of eventColumns.args and of the staging table.
const eventColumnList = `id, occurred_at, customer_id, key_id, provider, model, served_model,
    endpoint, stream, status, http_status, finish_reason, prompt_tokens, cached_tokens,
    cache_write_tokens, completion_tokens, reasoning_tokens, web_search_requests, usage_source,
    ttft_ms, duration_ms, error, price_id, override_id, currency, cost_e12, discount_bp, unpriced,
    corrections, end_user, metadata`

// batchEffects follows the insert of a batch's new events (the CTE ins):
// what they return, and the rollups, balances and keys they move. A key
// with a daily or monthly limit has its spend of the current UTC day and
// month moved (key_spend; a late event of an earlier period does not
// count), and a key whose spend crosses its limit, or a customer whose
// balance crosses its credit limit, goes to the key outbox: the budget
// states are pushed to the gateways as the meter commits, never polled.
// A key's last_used_at moves only when it is a minute or more behind: a
// busy key was updated by every batch, one new api_keys row version per
// key per batch for a figure read at minute precision.
const batchEffects = `RETURNING customer_id, key_id, model, currency, occurred_at, unpriced, prompt_tokens, cached_tokens,
    cache_write_tokens, completion_tokens, reasoning_tokens, web_search_requests, cost_e12,
    cost_e12::numeric * (10000 - discount_bp) * 0.0001 AS charge_e12
), rolled AS (
  INSERT INTO usage_hourly
  SELECT customer_id, date_trunc('hour', occurred_at), key_id, model, currency, count(*),
    count(*) FILTER (WHERE unpriced), sum(prompt_tokens), sum(cached_tokens), sum(cache_write_tokens),
    sum(completion_tokens), sum(reasoning_tokens), sum(web_search_requests), sum(cost_e12), sum(charge_e12)
  FROM ins GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
  ` + rollupAdd + `
), balanced AS (
  INSERT INTO customer_balances (customer_id, currency, charges_e12)
  SELECT customer_id, currency, sum(charge_e12) FROM ins WHERE currency <> '' GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (customer_id, currency) DO UPDATE SET charges_e12 = customer_balances.charges_e12 + EXCLUDED.charges_e12
  RETURNING customer_id, currency, credits_e12 - charges_e12 AS balance_e12
), used AS (
  UPDATE api_keys k SET last_used_at = u.at
  FROM (SELECT key_id, max(occurred_at) AS at FROM ins GROUP BY key_id) u
  WHERE k.id = u.key_id AND (k.last_used_at IS NULL OR k.last_used_at < u.at - interval '1 minute')
), spend AS (
  SELECT i.key_id, d.day, d.month, k.daily_limit_micros::numeric * 1000000 AS daily_e12,
    k.monthly_limit_micros::numeric * 1000000 AS monthly_e12,
    coalesce(sum(i.charge_e12) FILTER (WHERE i.occurred_at >= d.day), 0) AS day_add, sum(i.charge_e12) AS month_add
  FROM ins i CROSS JOIN ` + spendPeriods + `
  JOIN api_keys k ON k.id = i.key_id AND (k.daily_limit_micros IS NOT NULL OR k.monthly_limit_micros IS NOT NULL)
  JOIN customers c ON c.id = k.customer_id AND c.currency = i.currency
  WHERE i.occurred_at >= d.month
  GROUP BY 1, 2, 3, 4, 5
), spent AS (
  INSERT INTO key_spend (key_id, day_start, day_e12, month_start, month_e12)
  SELECT key_id, day, day_add, month, month_add FROM spend ORDER BY key_id
  ON CONFLICT (key_id) DO UPDATE SET
    day_e12 = CASE WHEN key_spend.day_start = EXCLUDED.day_start THEN key_spend.day_e12 ELSE 0 END + EXCLUDED.day_e12,
    month_e12 = CASE WHEN key_spend.month_start = EXCLUDED.month_start THEN key_spend.month_e12 ELSE 0 END + EXCLUDED.month_e12,
    day_start = EXCLUDED.day_start, month_start = EXCLUDED.month_start
  RETURNING key_id, day_e12, month_e12
), flipped AS (
  INSERT INTO key_outbox (kind, ref)
  SELECT 'key', s.key_id FROM spent s JOIN spend a USING (key_id)
  WHERE (s.day_e12 >= a.daily_e12 AND s.day_e12 - a.day_add < a.daily_e12)
     OR (s.month_e12 >= a.monthly_e12 AND s.month_e12 - a.month_add < a.monthly_e12)
  UNION ALL
  SELECT 'customer', b.customer_id FROM balanced b
  JOIN customers c ON c.id = b.customer_id AND c.currency = b.currency AND c.credit_limit_micros IS NOT NULL
  JOIN (SELECT customer_id, currency, sum(charge_e12) AS added FROM ins GROUP BY 1, 2) a
    ON a.customer_id = b.customer_id AND a.currency = b.currency
  WHERE b.balance_e12 <= -c.credit_limit_micros::numeric * 1000000
    AND b.balance_e12 + a.added > -c.credit_limit_micros::numeric * 1000000`

// eventColumns is a batch of rated events laid out column by column.
type eventColumns struct {
	// The UUIDs parsed here: pgx has no binary encoding of a []string as
	// uuid[], and its fallback (formatting the whole array into an error,
	// then sending text) cost more than the rest of the batch's encoding.
	id, customer, key                                                                   []pgtype.UUID
	provider, model, served, endpoint, status, finish, source, errText, currency, fixes []string
	endUser, deployment                                                                 []string
	attempt                                                                             []int32
	charged                                                                             []bool
	requestID                                                                           []pgtype.UUID // invalid (NULL) when none
	metadata                                                                            []*string     // JSON objects
	at                                                                                  []time.Time
	stream, unpriced                                                                    []bool
	httpStatus, discount                                                                []int32
	prompt, cached, cacheWrite, completion, reasoning, webSearch, ttft, duration, cost  []int64
	priceID, overrideID                                                                 []*int64
	duplicates                                                                          int64
}

// newEventColumns rates events and lays them out as columns. An id repeated
// within the batch keeps its first occurrence and counts as a duplicate.
func newEventColumns(events []usage.Event, p *pricing) (*eventColumns, error) {
	n := len(events)
	str := func() []string { return make([]string, 0, n) }
	i64 := func() []int64 { return make([]int64, 0, n) }
	ids := func() []pgtype.UUID { return make([]pgtype.UUID, 0, n) }
	c := &eventColumns{id: ids(), customer: ids(), key: ids(), provider: str(), model: str(), served: str(),
		endpoint: str(), status: str(), finish: str(), source: str(), errText: str(), currency: str(), fixes: str(),
		endUser: str(), metadata: make([]*string, 0, n), deployment: str(), attempt: make([]int32, 0, n),
		charged: make([]bool, 0, n), requestID: ids(),
		at: make([]time.Time, 0, n), stream: make([]bool, 0, n), unpriced: make([]bool, 0, n),
		httpStatus: make([]int32, 0, n), discount: make([]int32, 0, n),
		prompt: i64(), cached: i64(), cacheWrite: i64(), completion: i64(), reasoning: i64(), webSearch: i64(),
		ttft: i64(), duration: i64(), cost: i64(), priceID: make([]*int64, 0, n), overrideID: make([]*int64, 0, n)}
	seen := make(map[string]struct{}, len(events))
	for i := range events {
		e := &events[i]
		if _, dup := seen[e.ID]; dup {
			c.duplicates++
			continue
		}
		seen[e.ID] = struct{}{}
		r, err := p.rate(e)
		if err != nil {
			return nil, err
		}
		id, customer, key, err := eventUUIDs(e)
		if err != nil {
			return nil, err
		}
		u := e.Usage
		c.id = append(c.id, id)
		c.at = append(c.at, e.Time.UTC())
		c.customer = append(c.customer, customer)
		c.key = append(c.key, key)
		c.provider = append(c.provider, e.Provider)
		c.model = append(c.model, e.Model)
		c.served = append(c.served, e.ServedModel)
		c.endpoint = append(c.endpoint, e.Endpoint)
		c.stream = append(c.stream, e.Stream)
		c.status = append(c.status, string(e.Status))
		c.httpStatus = append(c.httpStatus, int32(e.HTTPStatus))
		c.finish = append(c.finish, e.FinishReason)
		c.prompt = append(c.prompt, u.PromptTokens)
		c.cached = append(c.cached, u.CachedTokens)
		c.cacheWrite = append(c.cacheWrite, u.CacheWriteTokens)
		c.completion = append(c.completion, u.CompletionTokens)
		c.reasoning = append(c.reasoning, u.ReasoningTokens)
		c.webSearch = append(c.webSearch, u.WebSearchRequests)
		c.source = append(c.source, string(e.UsageSource))
		c.ttft = append(c.ttft, e.TTFTMillis)
		c.duration = append(c.duration, e.DurationMillis)
		c.errText = append(c.errText, e.Error)
		c.priceID = append(c.priceID, r.PriceID)
		c.overrideID = append(c.overrideID, r.OverrideID)
		c.currency = append(c.currency, r.Currency)
		c.cost = append(c.cost, r.CostE12)
		c.discount = append(c.discount, r.DiscountBP)
		c.unpriced = append(c.unpriced, r.Unpriced)
		c.fixes = append(c.fixes, e.Corrections)
		c.endUser = append(c.endUser, e.EndUser)
		c.metadata = append(c.metadata, metadataJSON(e.Metadata))
		c.deployment = append(c.deployment, e.Deployment)
		c.attempt = append(c.attempt, int32(max(e.Attempt, 1)))
		c.charged = append(c.charged, !e.NotCharged)
		var rid pgtype.UUID
		if u, err := uuid.Parse(e.RequestID); err == nil {
			rid = pgtype.UUID{Bytes: u, Valid: true}
		}
		c.requestID = append(c.requestID, rid)
	}
	return c, nil
}

func (c *eventColumns) args() []any {
	return []any{c.id, c.at, c.customer, c.key, c.provider, c.model, c.served, c.endpoint,
		c.stream, c.status, c.httpStatus, c.finish, c.prompt, c.cached, c.cacheWrite,
		c.completion, c.reasoning, c.webSearch, c.source, c.ttft, c.duration, c.errText,
		c.priceID, c.overrideID, c.currency, c.cost, c.discount, c.unpriced, c.fixes, c.endUser, c.metadata,
		c.deployment, c.attempt, c.charged, c.requestID, c.duplicates}
}

// eventUUIDs parses e's id, customer and key. An event whose UUIDs do not
// parse is refused alone (the worker sets it aside), not with its batch.
func eventUUIDs(e *usage.Event) (id, customer, key pgtype.UUID, err error) {
	for _, f := range []struct {
		dst  *pgtype.UUID
		name string
		v    string
	}{{&id, "id", e.ID}, {&customer, "customer_id", e.CustomerID}, {&key, "key_id", e.KeyID}} {
		u, perr := uuid.Parse(f.v)
		if perr != nil {
			return id, customer, key, &usage.RefusedError{ID: e.ID, Reason: fmt.Sprintf("%s %q is not a UUID", f.name, f.v)}
		}
		*f.dst = pgtype.UUID{Bytes: u, Valid: true}
	}
	return id, customer, key, nil
}

// metadataJSON is an event's metadata as a JSON object, or nil (SQL NULL)
// when it has none. Its strings are valid UTF-8 without NUL (Normalize
// saw to that), so jsonb takes them.
func metadataJSON(m map[string]string) *string {
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil // a map of strings always marshals
	}
	s := string(b)
	return &s
}
