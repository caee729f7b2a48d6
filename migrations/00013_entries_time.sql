-- Exports (ledger/export.go) read the ledger entries of a period by
-- effective_at, and reconciliation (ledger/reconcile.go, checkRollups) the
-- rerate entries of its range the same way, across customers. No index
-- led with effective_at (ledger_entries_customer_idx is customer_id,
-- effective_at), so each read every entry ever made, and a re-rating
-- makes an entry per event: the entries grow like the events. With
-- 407,625 entries (42,000 credits, 365,625 rerate entries) an export of a
-- day read them all (Parallel Seq Scan, 407,600 rows removed by filter);
-- through this B-tree it reads the day's.
--
-- Built CONCURRENTLY, as migration 11: credits, refunds and re-ratings
-- write ledger_entries, and a plain CREATE INDEX would hold them for the
-- whole build. The DROP first lets a second run build again what an
-- interrupted one left invalid.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS ledger_entries_effective_idx;
CREATE INDEX CONCURRENTLY ledger_entries_effective_idx ON ledger_entries (effective_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS ledger_entries_effective_idx;
