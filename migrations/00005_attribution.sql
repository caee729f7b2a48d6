-- End-user and tag attribution (issue 13): the end user a request was made
-- for, as the client named it ('' when it named none), and the client's
-- tags of the request (a JSON object of strings; NULL when none). See
-- meter/usage: Event.EndUser and Event.Metadata for their sources and
-- bounds. Usage by end user is read from the events (the rollups do not
-- keep it), so a customer's events with an end user are indexed by it.

-- +goose Up
ALTER TABLE usage_events
    ADD COLUMN end_user text  NOT NULL DEFAULT '',
    ADD COLUMN metadata jsonb CHECK (jsonb_typeof(metadata) = 'object');
CREATE INDEX usage_events_customer_end_user_idx ON usage_events (customer_id, end_user, occurred_at)
    WHERE end_user <> '';

-- +goose Down
DROP INDEX usage_events_customer_end_user_idx;
ALTER TABLE usage_events DROP COLUMN metadata, DROP COLUMN end_user;
