package ledger

import (
	"encoding/json"
	"fmt"

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

// batchCTEs is the body of a batch statement after the CTE that names the
// batch (source: a relation of eventColumnList plus deployment, attempt,
// charged and request_id). It claims each id in event_ids (the dedupe key
// across partitions), inserts the events whose ids were new (a charged one
// into usage_events, an attempt not charged, failed before the client's
// first byte and retried elsewhere, into usage_attempts, which moves no
// rollup, balance or spend), applies batchEffects, and adds to the
// duplicates counter when duplicates (an SQL expression: the batch's
// events, its own duplicates included) exceeds what was claimed. Its
// result is the number of new events and how many of them are unpriced.
func batchCTEs(source, duplicates string) string {
	return `claimed AS (
  INSERT INTO event_ids (id, occurred_at) SELECT id, occurred_at FROM ` + source + `
  ON CONFLICT (id) DO NOTHING RETURNING id
), attempts AS (
  INSERT INTO usage_attempts (id, occurred_at, request_id, customer_id, key_id, provider, deployment, model,
    endpoint, stream, attempt, status, http_status, prompt_tokens, cached_tokens, cache_write_tokens,
    completion_tokens, reasoning_tokens, web_search_requests, usage_source, duration_ms, error, corrections)
  SELECT id, occurred_at, request_id, customer_id, key_id, provider, deployment, model,
    endpoint, stream, attempt, status, http_status, prompt_tokens, cached_tokens, cache_write_tokens,
    completion_tokens, reasoning_tokens, web_search_requests, usage_source, duration_ms, error, corrections
  FROM ` + source + ` JOIN claimed USING (id) WHERE NOT charged
), ins AS (
  INSERT INTO usage_events (` + eventColumnList + `, deployment, attempt)
  SELECT ` + eventColumnList + `, deployment, attempt FROM ` + source + ` JOIN claimed USING (id) WHERE charged
  ` + batchEffects + `
), counted AS (
  INSERT INTO ingest_counters (name, value)
  SELECT 'duplicates', d FROM (SELECT ` + duplicates + ` - (SELECT count(*) FROM claimed)) AS x(d)
  WHERE d > 0
  ON CONFLICT (name) DO UPDATE SET value = ingest_counters.value + EXCLUDED.value
)
SELECT (SELECT count(*) FROM claimed), (SELECT count(*) FROM ins WHERE unpriced)`
}

// eventColumnList is the columns of usage_events a batch writes, in the
// order of the staging table (stagingColumns).
const eventColumnList = `id, occurred_at, customer_id, key_id, provider, model, served_model,
    endpoint, stream, status, http_status, finish_reason, prompt_tokens, cached_tokens,
    cache_write_tokens, completion_tokens, reasoning_tokens, web_search_requests, usage_source,
    ttft_ms, duration_ms, error, price_id, override_id, currency, cost_e12, discount_bp, unpriced,
    corrections, end_user, metadata`

// batchEffects follows the insert of a batch's new events (the CTE ins):
// what they return, and the rollups, balances and keys they move. A key
// with a daily or monthly limit has its spend of the current UTC day and
// month moved (key_spend; a late event of an earlier period does not
// count, nor does a batch whose transaction began on a day before the
// row's: a worker that began before midnight and commits after one that
// began after it never takes the row back a day, throwing the new day's
// spend away), and a key whose spend crosses its limit or one of the
// spendMarks before it, or a customer whose balance crosses its credit
// limit or whose credit left halves (spendMarks), goes to the key
// outbox: the budget states are pushed to the gateways as the meter
// commits, never polled. The batch holds the key spend lock shared, taken before this
// statement (spendLockKey): a limit change cannot commit between its
// snapshot of api_keys and its commit.
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
  RETURNING customer_id, currency, credits_e12 - charges_e12 AS balance_e12, credits_e12
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
    day_e12 = CASE WHEN key_spend.day_start = EXCLUDED.day_start THEN key_spend.day_e12 + EXCLUDED.day_e12
      WHEN key_spend.day_start > EXCLUDED.day_start THEN key_spend.day_e12 ELSE EXCLUDED.day_e12 END,
    month_e12 = CASE WHEN key_spend.month_start = EXCLUDED.month_start THEN key_spend.month_e12 + EXCLUDED.month_e12
      WHEN key_spend.month_start > EXCLUDED.month_start THEN key_spend.month_e12 ELSE EXCLUDED.month_e12 END,
    day_start = greatest(key_spend.day_start, EXCLUDED.day_start),
    month_start = greatest(key_spend.month_start, EXCLUDED.month_start)
  RETURNING key_id, day_e12, month_e12
), flipped AS (
  INSERT INTO key_outbox (kind, ref)
  SELECT 'key', s.key_id FROM spent s JOIN spend a USING (key_id)
  WHERE EXISTS (SELECT 1 FROM unnest(` + spendMarks + `) f
    WHERE (s.day_e12 >= f * a.daily_e12 AND s.day_e12 - a.day_add < f * a.daily_e12)
       OR (s.month_e12 >= f * a.monthly_e12 AND s.month_e12 - a.month_add < f * a.monthly_e12))
  UNION ALL
  SELECT 'customer', b.customer_id FROM balanced b
  JOIN customers c ON c.id = b.customer_id AND c.currency = b.currency AND c.credit_limit_micros IS NOT NULL
  JOIN (SELECT customer_id, currency, sum(charge_e12) AS added FROM ins GROUP BY 1, 2) a
    ON a.customer_id = b.customer_id AND a.currency = b.currency
  CROSS JOIN LATERAL (SELECT (b.balance_e12 + c.credit_limit_micros::numeric * 1000000) / 1000000 AS after,
    (b.balance_e12 + a.added + c.credit_limit_micros::numeric * 1000000) / 1000000 AS before) left_micros
  WHERE left_micros.before > 0 AND (left_micros.after <= 0
    OR floor(log(2, greatest(left_micros.after, 1))) < floor(log(2, greatest(left_micros.before, 1))))`

// spendMarks are the shares of a key's daily or monthly limit whose
// crossing by a batch's charges publishes its state: besides the limit
// itself (1), which blocks it, the shares before it, so that every gateway
// (each of which counts only its own charges between two states:
// gateway's spend holds) and a gateway started anew learn what was spent
// while most of it is still left. At most four states a key's limit a
// day, whatever its traffic. A customer with a credit limit has its state
// published each time what it has left (balance + credit limit) halves,
// to a power of two micro-units, and when it is spent: shares of a total
// would not do, its credits only growing (after a top-up of 10 on 100
// spent of 110, no share of 110 was crossed before 0). From $1,000 left,
// at most 30 states.
const spendMarks = `ARRAY[0.5, 0.75, 0.9, 1]::numeric[]`

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
