-- What the gateway or the meter corrected in an event before storing it
-- (meter/usage: Event.Normalize): comma-separated codes such as
-- cache_over_prompt, negative_count or model_cleaned. Empty when nothing was.

-- +goose Up
ALTER TABLE usage_events ADD COLUMN corrections text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE usage_events DROP COLUMN corrections;
