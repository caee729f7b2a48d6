-- A re-rating is a rating, and a rating records its terms: an event keeps
-- the price version and the override (custom price or discount) that first
-- rated it, and a rerate entry now keeps those that rated it again. Before,
-- a rerate entry named only the price book's version, which a custom price
-- had not used, and no override or discount: a charge moved by a custom
-- price or a discount given after the fact could not be traced to its
-- terms. Rerate entries made before this migration leave them NULL.

-- +goose Up
ALTER TABLE ledger_entries ADD COLUMN override_id bigint, ADD COLUMN discount_bp integer;

-- +goose Down
ALTER TABLE ledger_entries DROP COLUMN discount_bp, DROP COLUMN override_id;
