-- Billing: events partitioned by month with a dedupe key that holds across
-- partitions; ledger entries (credits, adjustments, refunds, re-rating);
-- hourly rollups and balances kept in the same transaction as the events;
-- the full price book (reasoning, per-request fee, server-tool units,
-- effective windows) and per-customer overrides; budgets.
--
-- Money units: prices and limits are integer micro-units of the currency
-- (1e-6); event costs are integer 1e-12 units ("e12"). A discount of d
-- basis points makes an event's charge cost_e12 × (10000 − d) / 10000,
-- which numeric holds exactly (at most four more decimal places), so sums
-- of charges are exact and rounding happens once, on a statement.

-- +goose Up
ALTER TABLE customers
    ADD COLUMN currency text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    -- NULL: no budget (postpaid). A number: the customer may spend while
    -- balance > -credit_limit; 0 is strictly prepaid.
    ADD COLUMN credit_limit_micros bigint CHECK (credit_limit_micros >= 0),
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

ALTER TABLE api_keys
    ADD COLUMN daily_limit_micros bigint CHECK (daily_limit_micros >= 0),
    ADD COLUMN monthly_limit_micros bigint CHECK (monthly_limit_micros >= 0),
    ADD COLUMN last_used_at timestamptz;

ALTER TABLE prices
    -- NULL: reasoning tokens are output tokens at output_micros.
    ADD COLUMN reasoning_micros bigint CHECK (reasoning_micros >= 0),
    -- Per request, in micro-units.
    ADD COLUMN request_fee_micros bigint NOT NULL DEFAULT 0 CHECK (request_fee_micros >= 0),
    -- Per web search request (a server-tool unit), in micro-units.
    ADD COLUMN web_search_micros bigint NOT NULL DEFAULT 0 CHECK (web_search_micros >= 0),
    -- NULL: in force until a later version starts.
    ADD COLUMN effective_to timestamptz CHECK (effective_to > effective_from);

-- A customer's own terms for a model (or every model, model = ''): a
-- custom price (the price fields) or a percentage discount (discount_bp,
-- basis points) off the price book.
CREATE TABLE price_overrides (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer_id         uuid        NOT NULL REFERENCES customers (id),
    model               text        NOT NULL,
    currency            text        CHECK (currency ~ '^[A-Z]{3}$'),
    input_micros        bigint      CHECK (input_micros >= 0),
    cached_input_micros bigint      CHECK (cached_input_micros >= 0),
    cache_write_micros  bigint      CHECK (cache_write_micros >= 0),
    output_micros       bigint      CHECK (output_micros >= 0),
    reasoning_micros    bigint      CHECK (reasoning_micros >= 0),
    request_fee_micros  bigint      CHECK (request_fee_micros >= 0),
    web_search_micros   bigint      CHECK (web_search_micros >= 0),
    discount_bp         integer     CHECK (discount_bp BETWEEN 0 AND 10000),
    effective_from      timestamptz NOT NULL,
    effective_to        timestamptz CHECK (effective_to > effective_from),
    created_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((discount_bp IS NULL) <> (input_micros IS NULL)),
    UNIQUE (customer_id, model, effective_from)
);
CREATE TRIGGER price_overrides_append_only BEFORE UPDATE OR DELETE ON price_overrides
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Usage events, partitioned by month of occurred_at. Partitions are made
-- by the ledger as events arrive. A partitioned table's unique keys must
-- include the partition key, so event_ids carries the dedupe key across
-- partitions: an event is stored only if its id is new there.
ALTER TABLE usage_events RENAME TO usage_events_v1;
ALTER INDEX usage_events_customer_time_idx RENAME TO usage_events_v1_customer_time_idx;
DROP TRIGGER usage_events_append_only ON usage_events_v1;

CREATE TABLE event_ids (
    id          uuid        PRIMARY KEY,
    occurred_at timestamptz NOT NULL
);

CREATE TABLE usage_events (
    id                  uuid        NOT NULL,
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
    usage_source        text        NOT NULL,
    ttft_ms             bigint      NOT NULL,
    duration_ms         bigint      NOT NULL,
    error               text        NOT NULL,
    -- The price version (prices.id) and override (price_overrides.id) the
    -- event was rated with; price_id NULL means unpriced, rated at 0.
    price_id            bigint,
    override_id         bigint,
    currency            text        NOT NULL,
    -- Cost at the price used, before any discount, in 1e-12 units.
    cost_e12            bigint      NOT NULL,
    discount_bp         integer     NOT NULL DEFAULT 0,
    -- No price in force (book or custom override): stored at cost 0.
    unpriced            boolean     NOT NULL DEFAULT false,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, occurred_at)
) PARTITION BY RANGE (occurred_at);
CREATE INDEX usage_events_customer_time_idx ON usage_events (customer_id, occurred_at);
CREATE TRIGGER usage_events_append_only BEFORE UPDATE OR DELETE ON usage_events
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Credits, adjustments, refunds and re-rating, in 1e-12 units. A positive
-- amount raises the customer's balance; a negative one lowers it.
CREATE TABLE ledger_entries (
    id              bigint        GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer_id     uuid          NOT NULL REFERENCES customers (id),
    kind            text          NOT NULL CHECK (kind IN ('credit', 'adjustment', 'refund', 'rerate')),
    amount_e12      numeric(40,4) NOT NULL,
    currency        text          NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    -- When the entry takes effect; it places the entry in its period.
    effective_at    timestamptz   NOT NULL,
    -- For rerate entries: the event re-rated, its key and model.
    event_id        uuid,
    key_id          uuid,
    model           text,
    price_id        bigint,
    -- An entry this one reverses (a refund of a credit, say).
    reverses        bigint        REFERENCES ledger_entries (id),
    idempotency_key text          UNIQUE,
    memo            text          NOT NULL DEFAULT '',
    created_at      timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_customer_idx ON ledger_entries (customer_id, effective_at);
CREATE INDEX ledger_entries_event_idx ON ledger_entries (event_id) WHERE event_id IS NOT NULL;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Hourly rollups per customer, key and model: derived from the events
-- (and rerate entries) in the same transactions, so usage queries never
-- scan raw events. charge_e12 is cost after discounts and re-rating.
CREATE TABLE usage_hourly (
    customer_id         uuid          NOT NULL,
    hour                timestamptz   NOT NULL,
    key_id              uuid          NOT NULL,
    model               text          NOT NULL,
    currency            text          NOT NULL,
    requests            bigint        NOT NULL,
    unpriced_requests   bigint        NOT NULL,
    prompt_tokens       bigint        NOT NULL,
    cached_tokens       bigint        NOT NULL,
    cache_write_tokens  bigint        NOT NULL,
    completion_tokens   bigint        NOT NULL,
    reasoning_tokens    bigint        NOT NULL,
    web_search_requests bigint        NOT NULL,
    cost_e12            numeric(40,4) NOT NULL,
    charge_e12          numeric(40,4) NOT NULL,
    PRIMARY KEY (customer_id, hour, key_id, model, currency)
);
CREATE INDEX usage_hourly_key_idx ON usage_hourly (key_id, hour);

-- Running totals per customer and currency, derived like the rollups:
-- balance = credits_e12 - charges_e12.
CREATE TABLE customer_balances (
    customer_id uuid          NOT NULL,
    currency    text          NOT NULL,
    credits_e12 numeric(40,4) NOT NULL DEFAULT 0,
    charges_e12 numeric(40,4) NOT NULL DEFAULT 0,
    PRIMARY KEY (customer_id, currency)
);

-- Ingest bookkeeping for reconciliation: deliveries refused as duplicates.
CREATE TABLE ingest_counters (
    name  text   PRIMARY KEY,
    value bigint NOT NULL
);

-- Move the events of the first schema into monthly partitions.
-- +goose StatementBegin
DO $$
DECLARE m timestamptz;
BEGIN
    FOR m IN SELECT DISTINCT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' FROM usage_events_v1 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF usage_events FOR VALUES FROM (%L) TO (%L)',
            'usage_events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'), m, m + interval '1 month');
    END LOOP;
END $$;
-- +goose StatementEnd
INSERT INTO event_ids (id, occurred_at) SELECT id, occurred_at FROM usage_events_v1;
INSERT INTO usage_events (id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint,
    stream, status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens,
    completion_tokens, reasoning_tokens, web_search_requests, usage_source, ttft_ms, duration_ms, error,
    price_id, currency, cost_e12, unpriced, recorded_at)
SELECT id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint,
    stream, status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens,
    completion_tokens, reasoning_tokens, web_search_requests, usage_source, ttft_ms, duration_ms, error,
    price_id, currency, cost_e12, price_id IS NULL, recorded_at FROM usage_events_v1;
INSERT INTO usage_hourly
SELECT customer_id, date_trunc('hour', occurred_at), key_id, model, currency, count(*),
    count(*) FILTER (WHERE price_id IS NULL), sum(prompt_tokens), sum(cached_tokens),
    sum(cache_write_tokens), sum(completion_tokens), sum(reasoning_tokens), sum(web_search_requests),
    sum(cost_e12), sum(cost_e12)
FROM usage_events_v1 GROUP BY 1, 2, 3, 4, 5;
INSERT INTO customer_balances (customer_id, currency, charges_e12)
SELECT customer_id, currency, sum(cost_e12) FROM usage_events_v1 WHERE currency <> '' GROUP BY 1, 2;
DROP TABLE usage_events_v1;

-- +goose Down
-- Back to the first schema's single table; ledger entries, overrides,
-- rollups and budgets are lost (they did not exist there).
CREATE TABLE usage_events_v1 (LIKE usage_events);
INSERT INTO usage_events_v1 SELECT * FROM usage_events;
DROP TABLE usage_events;
ALTER TABLE usage_events_v1 DROP COLUMN override_id, DROP COLUMN discount_bp, DROP COLUMN unpriced;
ALTER TABLE usage_events_v1 RENAME TO usage_events;
ALTER TABLE usage_events ADD PRIMARY KEY (id);
ALTER TABLE usage_events ADD CONSTRAINT usage_events_price_id_fkey FOREIGN KEY (price_id) REFERENCES prices (id);
ALTER TABLE usage_events ADD CONSTRAINT usage_events_usage_source_check CHECK (usage_source IN ('upstream', 'partial', 'estimated'));
CREATE INDEX usage_events_customer_time_idx ON usage_events (customer_id, occurred_at);
CREATE TRIGGER usage_events_append_only BEFORE UPDATE OR DELETE ON usage_events
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
DROP TABLE ingest_counters, customer_balances, usage_hourly, ledger_entries, event_ids, price_overrides;
ALTER TABLE prices DROP COLUMN reasoning_micros, DROP COLUMN request_fee_micros,
    DROP COLUMN web_search_micros, DROP COLUMN effective_to;
ALTER TABLE api_keys DROP COLUMN daily_limit_micros, DROP COLUMN monthly_limit_micros, DROP COLUMN last_used_at;
ALTER TABLE customers DROP COLUMN currency, DROP COLUMN credit_limit_micros, DROP COLUMN updated_at;
