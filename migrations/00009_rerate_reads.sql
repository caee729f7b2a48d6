-- Re-rating (ledger/rerate.go) reads a period's events in time order, a
-- batch of 2,000 at a time, from the last event of the batch before.
-- usage_events has no index that leads with occurred_at, so each batch
-- read its month's partition whole and sorted it: the time of a re-rating
-- grew with the square of the events it covered (9 minutes for 1,500,000
-- events in one month).
--
-- A BRIN index keeps, for each range of 128 table blocks, the least and
-- greatest occurred_at in it (events are stored about in the order they
-- occur), so that a batch reads the blocks of its time window alone.
-- Unlike a B-tree it costs an insert nothing until its range fills;
-- autosummarize has autovacuum summarize each range as the next one
-- begins, so that recent events are not read on every batch.
--
-- On the partitioned table it is made on every month's partition, and on
-- the partitions made later. It is built in the migration's transaction,
-- which holds writes to usage_events for one read of the table: the meter
-- retries meanwhile, and the events wait in JetStream.

--
-- Each event's entries are read by event_id (ledger_entries_event_idx),
-- and whether a refund of it was reversed, by reverses, which had no
-- index: the check read every entry. Few entries reverse another, so its
-- index holds those alone.

-- +goose Up
CREATE INDEX usage_events_time_brin ON usage_events USING brin (occurred_at) WITH (autosummarize = on);
CREATE INDEX ledger_entries_reverses_idx ON ledger_entries (reverses) WHERE reverses IS NOT NULL;

-- +goose Down
DROP INDEX ledger_entries_reverses_idx;
DROP INDEX usage_events_time_brin;
