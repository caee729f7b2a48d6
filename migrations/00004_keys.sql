-- Keys and limits pushed to the gateways (issue 13): per-key rate,
-- concurrency, expiry and model limits; each limited key's spend of the
-- current UTC day and month, kept with the events; and the change outbox
-- from which the admin's syncer pushes every change of a key's or a
-- customer's state to the gateways' key buckets, in order.

-- +goose Up
ALTER TABLE api_keys
    -- Requests per minute; tokens per minute (prompt + completion, as the
    -- providers report them); requests open at once. NULL: no limit.
    ADD COLUMN rpm_limit      bigint  CHECK (rpm_limit > 0),
    ADD COLUMN tpm_limit      bigint  CHECK (tpm_limit > 0),
    ADD COLUMN max_concurrent integer CHECK (max_concurrent > 0),
    -- When the key stops working; NULL: never.
    ADD COLUMN expires_at     timestamptz,
    -- Model names, or "provider/*"; empty: every model.
    ADD COLUMN allowed_models text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN updated_at     timestamptz NOT NULL DEFAULT now();

-- The spend of each key with a daily or monthly limit in its current UTC
-- day and month (1e-12 units of the customer's currency), moved with each
-- batch of events: a late event of an earlier day or month is not counted.
CREATE TABLE key_spend (
    key_id      uuid          PRIMARY KEY,
    day_start   timestamptz   NOT NULL,
    day_e12     numeric(40,4) NOT NULL,
    month_start timestamptz   NOT NULL,
    month_e12   numeric(40,4) NOT NULL
);
INSERT INTO key_spend (key_id, day_start, day_e12, month_start, month_e12)
SELECT k.id, d.day, coalesce(sum(h.charge_e12) FILTER (WHERE h.hour >= d.day), 0),
    d.month, coalesce(sum(h.charge_e12), 0)
FROM api_keys k
CROSS JOIN (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day,
    date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month) d
JOIN customers c ON c.id = k.customer_id
LEFT JOIN usage_hourly h ON h.customer_id = k.customer_id AND h.key_id = k.id
    AND h.hour >= d.month AND h.currency = c.currency
WHERE k.daily_limit_micros IS NOT NULL OR k.monthly_limit_micros IS NOT NULL
GROUP BY k.id, d.day, d.month;

-- Every change the gateways must hear of: of a key's state (kind 'key',
-- ref its id), of a customer's budget state or overrides (kind
-- 'customer', ref its id), of a model's prices (kind 'price', ref the
-- model). The syncers take the rows, publish the current state of each,
-- and remove them.
CREATE TABLE key_outbox (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('key', 'customer', 'price')),
    ref        text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The identity of this database's key states: the syncer marks the
-- gateways' bucket with it after a full sync, and syncs in full again when
-- the mark is missing or another (the bucket lost, or another database).
CREATE TABLE key_sync_epoch (
    epoch uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO key_sync_epoch DEFAULT VALUES;

-- Wake the syncer (LISTEN tollgate_key_outbox) when changes commit.
-- +goose StatementBegin
CREATE FUNCTION key_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tollgate_key_outbox', '');
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER key_outbox_notify AFTER INSERT ON key_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION key_outbox_notify();

-- +goose Down
DROP TRIGGER key_outbox_notify ON key_outbox;
DROP FUNCTION key_outbox_notify();
DROP TABLE key_outbox, key_spend, key_sync_epoch;
ALTER TABLE api_keys DROP COLUMN rpm_limit, DROP COLUMN tpm_limit, DROP COLUMN max_concurrent,
    DROP COLUMN expires_at, DROP COLUMN allowed_models, DROP COLUMN updated_at;
