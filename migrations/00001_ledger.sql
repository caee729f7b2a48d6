-- The ledger's first shape: customers, API keys (stored as hashes), the
-- effective-dated price book, and rated usage events.
--
-- Units: token counts are integers; prices are integer micro-units of the
-- currency per million tokens; costs are integer 1e-12 units of the currency,
-- so that cost = tokens × price exactly (see ledger/rate.go).

-- +goose Up
CREATE TABLE customers (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text        NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id uuid        NOT NULL REFERENCES customers (id),
    name        text        NOT NULL DEFAULT '',
    -- The first characters of the secret, shown in listings so a key can be recognised.
    prefix      text        NOT NULL,
    -- SHA-256 of the whole secret; the secret itself is never stored.
    secret_hash bytea       NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_customer_idx ON api_keys (customer_id);

-- One row per price version. A version applies to events of its model from
-- effective_from until the next version's effective_from.
CREATE TABLE prices (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    model               text        NOT NULL CHECK (model <> ''),
    currency            text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    input_micros        bigint      NOT NULL CHECK (input_micros >= 0),
    cached_input_micros bigint      NOT NULL CHECK (cached_input_micros >= 0),
    cache_write_micros  bigint      NOT NULL CHECK (cache_write_micros >= 0),
    output_micros       bigint      NOT NULL CHECK (output_micros >= 0),
    effective_from      timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (model, effective_from)
);

-- One row per upstream request, keyed by the request id (the idempotency key).
CREATE TABLE usage_events (
    id                  uuid        PRIMARY KEY,
    occurred_at         timestamptz NOT NULL,
    customer_id         uuid        NOT NULL,
    key_id              uuid        NOT NULL,
    provider            text        NOT NULL,
    model               text        NOT NULL,
    served_model        text        NOT NULL,
    endpoint            text        NOT NULL,
    stream              boolean     NOT NULL,
    status              text        NOT NULL,
    http_status         integer     NOT NULL,
    finish_reason       text        NOT NULL,
    prompt_tokens       bigint      NOT NULL,
    cached_tokens       bigint      NOT NULL,
    cache_write_tokens  bigint      NOT NULL,
    completion_tokens   bigint      NOT NULL,
    reasoning_tokens    bigint      NOT NULL,
    web_search_requests bigint      NOT NULL,
    usage_source        text        NOT NULL CHECK (usage_source IN ('upstream', 'partial', 'estimated')),
    ttft_ms             bigint      NOT NULL,
    duration_ms         bigint      NOT NULL,
    error               text        NOT NULL,
    -- The price version the event was rated with; NULL means unpriced (rated at 0).
    price_id            bigint      REFERENCES prices (id),
    currency            text        NOT NULL,
    cost_e12            bigint      NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_events_customer_time_idx ON usage_events (customer_id, occurred_at);

-- The ledger is append-only: rows are never changed or removed; corrections
-- are new rows.
-- +goose StatementBegin
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER usage_events_append_only BEFORE UPDATE OR DELETE ON usage_events
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER prices_append_only BEFORE UPDATE OR DELETE ON prices
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- +goose Down
DROP TABLE usage_events;
DROP TABLE prices;
DROP FUNCTION ledger_append_only();
DROP TABLE api_keys;
DROP TABLE customers;
