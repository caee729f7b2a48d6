-- A customer's keys are listed a page at a time in creation order
-- (ledger.KeysPage: WHERE customer_id = $1 ORDER BY created_at, id after a
-- cursor). api_keys_customer_idx (customer_id) finds a customer's keys but
-- not in that order: each page read and sorted all of them, and the list
-- sent every key in one answer (a customer with 100,000 keys: a 239 MB
-- console page, 16.5 s). This B-tree gives the order, so that a page reads
-- its rows alone.
--
-- Built CONCURRENTLY (so outside a transaction): the meter's batches
-- write api_keys (last_used_at), and a plain CREATE INDEX would hold them,
-- and every key change, for the whole build. An interrupted concurrent
-- build leaves an invalid index behind; the DROP first lets a second run
-- of this migration build it again.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS api_keys_customer_created_idx;
CREATE INDEX CONCURRENTLY api_keys_customer_created_idx ON api_keys (customer_id, created_at, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS api_keys_customer_created_idx;
