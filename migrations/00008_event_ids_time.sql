-- Reconciliation counts the dedupe keys in event_ids by occurred_at over
-- the range it checks (ledger/reconcile.go, checkIDs). event_ids has no
-- index on occurred_at and keeps every id ever stored, so that count read
-- the whole table: a month's reconciliation grew with the ledger's age,
-- not with the month. With a year of ids (6,000,000 rows, 299 MB) a
-- month's count took 211-235 ms read whole, 59-75 ms through this index.
--
-- A BRIN index keeps, for each range of 128 table blocks, the least and
-- greatest occurred_at in it: 32 kB for those 6,000,000 rows. Ids are
-- claimed about in the order their events occur, so a month's rows lie in
-- few ranges. An insert into the table's last, not yet summarized, range
-- costs nothing more (1,000,000 inserts: 5.9-7.4 s with it, 6.2-7.4 s
-- without, alternating); VACUUM summarizes the ranges that filled.
--
-- It is built in the migration's transaction, which holds writes to
-- event_ids for one read of the table (0.7 s for those 6,000,000 rows):
-- the meter retries meanwhile, and the events wait in JetStream.

-- +goose Up
CREATE INDEX event_ids_time_brin ON event_ids USING brin (occurred_at);

-- +goose Down
DROP INDEX event_ids_time_brin;
