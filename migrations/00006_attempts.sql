-- Deployments and failover (issue 15): each upstream attempt of a request
-- is an event. The attempt the client's outcome came from is charged as
-- every event is, in usage_events, which now names its deployment and
-- attempt number (1 for every event before deployments). An attempt that
-- failed before the client got a byte and was retried elsewhere is not
-- charged: it is the operator's cost, kept in usage_attempts (its id
-- claimed in event_ids like any event's, so it is stored once), never in
-- the rollups, balances or statements, and read by the usage API's
-- group_by=deployment|provider beside the charged events, to reconcile a
-- provider's invoice deployment by deployment. See meter/usage:
-- Event.Deployment, Attempt, RequestID and NotCharged.

-- +goose Up
ALTER TABLE usage_events
    ADD COLUMN deployment text    NOT NULL DEFAULT '',
    ADD COLUMN attempt    integer NOT NULL DEFAULT 1;

CREATE TABLE usage_attempts (
    id                  uuid        PRIMARY KEY,
    occurred_at         timestamptz NOT NULL,
    -- The client request (its X-Request-Id) the attempt was made for: the
    -- id of the request's charged event.
    request_id          uuid,
    customer_id         uuid        NOT NULL,
    key_id              uuid        NOT NULL,
    provider            text        NOT NULL,
    deployment          text        NOT NULL,
    model               text        NOT NULL,
    endpoint            text        NOT NULL,
    stream              boolean     NOT NULL,
    attempt             integer     NOT NULL,
    status              text        NOT NULL,
    http_status         integer     NOT NULL,
    prompt_tokens       bigint      NOT NULL,
    cached_tokens       bigint      NOT NULL,
    cache_write_tokens  bigint      NOT NULL,
    completion_tokens   bigint      NOT NULL,
    reasoning_tokens    bigint      NOT NULL,
    web_search_requests bigint      NOT NULL,
    usage_source        text        NOT NULL CHECK (usage_source IN ('upstream', 'partial', 'estimated')),
    duration_ms         bigint      NOT NULL,
    error               text        NOT NULL,
    corrections         text        NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_attempts_time_idx ON usage_attempts (occurred_at);
CREATE INDEX usage_attempts_customer_time_idx ON usage_attempts (customer_id, occurred_at);
CREATE TRIGGER usage_attempts_append_only BEFORE UPDATE OR DELETE ON usage_attempts
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- +goose Down
-- The attempts go with their table (export them first: the usage API's
-- group_by=deployment), and so do their ids in event_ids: before this
-- migration every id there is an event's, and reconciliation counts an id
-- left behind as an id without an event, at this version and after
-- migrating up again.
DELETE FROM event_ids i USING usage_attempts a WHERE i.id = a.id AND i.occurred_at = a.occurred_at;
DROP TABLE usage_attempts;
ALTER TABLE usage_events DROP COLUMN attempt, DROP COLUMN deployment;
