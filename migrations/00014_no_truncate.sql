-- The append-only triggers refuse UPDATE and DELETE row by row; TRUNCATE
-- fires no row trigger, so one statement emptied ledger_entries, the price
-- book, the overrides, the attempts or the usage events (a review: the
-- entries of every customer, and a month of events, each gone at once).
-- A statement trigger on TRUNCATE refuses it. A partition is a table of
-- its own, and TRUNCATE on one fires only its own triggers (the parent's
-- hold only a TRUNCATE of usage_events), so every month's partition gets
-- one too: those there now here, those made later by the ledger
-- (Store.makePartition) as it attaches them. Detaching a month to archive
-- it, and dropping the archived table, stay as docs/operations.md says.

-- +goose Up
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON usage_events
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON prices
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON price_overrides
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON usage_attempts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
-- +goose StatementBegin
DO $$
DECLARE
    part regclass;
BEGIN
    -- A partition made by Store.makePartition while the ledger was rolled
    -- back below 14 (a process of this release still running) has it.
    FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'usage_events'::regclass
            AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = i.inhrelid AND t.tgname = 'ledger_no_truncate') LOOP
        EXECUTE format('CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON %s '
            'FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()', part);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- Every table that has it: the partitions, attached or detached since
-- (an archived month not yet dropped), and the ledger's tables.
-- +goose StatementBegin
DO $$
DECLARE
    rel regclass;
BEGIN
    FOR rel IN SELECT tgrelid::regclass FROM pg_trigger WHERE tgname = 'ledger_no_truncate' LOOP
        EXECUTE format('DROP TRIGGER ledger_no_truncate ON %s', rel);
    END LOOP;
END;
$$;
-- +goose StatementEnd
