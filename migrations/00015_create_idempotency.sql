-- Creating a customer or an API key takes an idempotency key (the
-- Idempotency-Key header or the body's idempotency_key), as a credit or
-- an adjustment does: a retry after a lost answer made a second customer,
-- or a second live key. Each row keeps the idempotency key it was made
-- with, unique among customers and among keys, and the SHA-256 digest of
-- the creating request as the ledger normalized it, so that a retry is
-- told from another request with the same idempotency key. Rows made
-- without one (all those made before this migration) keep NULL in both.

-- +goose Up
ALTER TABLE customers
    ADD COLUMN idempotency_key text UNIQUE,
    ADD COLUMN request_digest  bytea,
    ADD CONSTRAINT customers_idempotency_digest CHECK ((idempotency_key IS NULL) = (request_digest IS NULL));
ALTER TABLE api_keys
    ADD COLUMN idempotency_key text UNIQUE,
    ADD COLUMN request_digest  bytea,
    ADD CONSTRAINT api_keys_idempotency_digest CHECK ((idempotency_key IS NULL) = (request_digest IS NULL));

-- +goose Down
ALTER TABLE api_keys DROP COLUMN idempotency_key, DROP COLUMN request_digest;
ALTER TABLE customers DROP COLUMN idempotency_key, DROP COLUMN request_digest;
