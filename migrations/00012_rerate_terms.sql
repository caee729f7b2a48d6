-- A re-rating is a rating, and a rating records its terms: an event keeps
-- the price version and the override (custom price or discount) that first
-- rated it, and a rerate entry now keeps those that rated it again. Before,
-- a rerate entry named only the price book's version, which a custom price
-- had not used, and no override or discount: a charge moved by a custom
-- price or a discount given after the fact could not be traced to its
-- terms. Rerate entries made before this migration leave them NULL.
--
-- Adding the columns is instant but needs the table to itself, and an
-- ALTER TABLE waiting for an open read of ledger_entries (an export
-- downloading) queues every credit, refund, statement and request-log read
-- behind it for as long. So it asks for the lock 200 ms at a time (what
-- queues behind a try waits that long at most), and lets them through for
-- 200 ms between tries, until the readers are done: about every other
-- report of the migration lock's holder names the reader it waits for.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    SET LOCAL lock_timeout = '200ms';
    LOOP
        BEGIN
            ALTER TABLE ledger_entries ADD COLUMN override_id bigint, ADD COLUMN discount_bp integer;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE ledger_entries DROP COLUMN discount_bp, DROP COLUMN override_id;
