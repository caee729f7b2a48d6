-- Re-rating moves an event's list cost (before discount) as well as its
-- charge. An event is never changed, so its cost_e12 stays as first rated
-- (0 while unpriced); a rerate entry's cost_e12 is the change its
-- re-rating made to the list cost, so that an event's list cost now is
-- usage_events.cost_e12 plus its rerate entries' cost_e12, which is what
-- usage_hourly.cost_e12 sums and reconciliation checks. NULL on entries of
-- the other kinds.
--
-- Rerate entries made before this migration moved usage_hourly.cost_e12
-- only when they first priced an event (by its list cost; a re-rating of
-- a priced event left it stale). They are given what can be known: the
-- entry that first priced an event gets its charge (−amount, which is the
-- list cost unless a discount applied), the others 0, and the rollup rows
-- they touch are recomputed to match, so that reconciliation is clean.
-- Re-rating those periods again (POST /admin/v1/rerate) then brings their
-- list costs to the price book: it moves the list cost wherever it differs
-- from the rating now, even when the charge does not change.

-- +goose Up
ALTER TABLE ledger_entries ADD COLUMN cost_e12 numeric(40,4);

-- The append-only trigger guards the amounts; this only fills the new
-- column, once, in the migration's transaction.
ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only;
UPDATE ledger_entries l SET cost_e12 = CASE
    WHEN l.id = (SELECT min(f.id) FROM ledger_entries f WHERE f.event_id = l.event_id AND f.kind = 'rerate')
      AND EXISTS (SELECT 1 FROM usage_events e WHERE e.id = l.event_id AND e.occurred_at = l.effective_at AND e.unpriced) THEN -l.amount_e12
    ELSE 0 END
WHERE l.kind = 'rerate';
ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only;

UPDATE usage_hourly h SET cost_e12 = x.cost_e12
FROM (
    SELECT e.customer_id, t.hour, e.key_id, e.model, coalesce(rr.currency, e.currency) AS currency,
        sum(e.cost_e12 + coalesce(rr.cost_e12, 0)) AS cost_e12
    FROM (SELECT DISTINCT customer_id, date_trunc('hour', effective_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS hour
          FROM ledger_entries WHERE kind = 'rerate') t
    JOIN usage_events e ON e.customer_id = t.customer_id AND e.occurred_at >= t.hour
        AND e.occurred_at < t.hour + interval '1 hour'
    LEFT JOIN (SELECT event_id, max(currency) AS currency, sum(cost_e12) AS cost_e12 FROM ledger_entries
               WHERE kind = 'rerate' GROUP BY event_id) rr ON rr.event_id = e.id
    GROUP BY 1, 2, 3, 4, 5
) x
WHERE h.customer_id = x.customer_id AND h.hour = x.hour AND h.key_id = x.key_id AND h.model = x.model
    AND h.currency = x.currency AND h.cost_e12 <> x.cost_e12;

-- +goose Down
ALTER TABLE ledger_entries DROP COLUMN cost_e12;
