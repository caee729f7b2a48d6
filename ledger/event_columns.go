package ledger

import (
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// insertEvents inserts a batch passed column by column as arrays, in one
// statement and one round trip; ON CONFLICT makes a redelivered event a no-op.
const insertEvents = `
INSERT INTO usage_events (id, occurred_at, customer_id, key_id, provider, model, served_model,
  endpoint, stream, status, http_status, finish_reason, prompt_tokens, cached_tokens,
  cache_write_tokens, completion_tokens, reasoning_tokens, web_search_requests, usage_source,
  ttft_ms, duration_ms, error, price_id, currency, cost_e12)
SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::text[], $6::text[],
  $7::text[], $8::text[], $9::boolean[], $10::text[], $11::integer[], $12::text[], $13::bigint[],
  $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::text[],
  $20::bigint[], $21::bigint[], $22::text[], $23::bigint[], $24::text[], $25::bigint[])
ON CONFLICT (id) DO NOTHING`

// eventColumns is a batch of rated events laid out column by column.
type eventColumns struct {
	id, customer, key, provider, model, served, endpoint, status, finish, source, errText, currency []string
	at                                                                                              []time.Time
	stream                                                                                          []bool
	httpStatus                                                                                      []int32
	prompt, cached, cacheWrite, completion, reasoning, webSearch, ttft, duration, cost              []int64
	priceID                                                                                         []*int64
}

// newEventColumns rates events against book (price versions by model, sorted
// by effective_from) and lays them out as columns. An id repeated within the
// batch keeps its first occurrence.
func newEventColumns(events []meter.Event, book map[string][]Price) (*eventColumns, error) {
	c := &eventColumns{}
	seen := make(map[string]struct{}, len(events))
	for i := range events {
		e := &events[i]
		if _, dup := seen[e.ID]; dup {
			continue
		}
		seen[e.ID] = struct{}{}
		var priceID *int64
		var cost int64
		currency := ""
		if p, ok := priceAt(book[e.Model], e.Time); ok {
			var err error
			if cost, err = Rate(e.Usage, p); err != nil {
				return nil, errorf(EInvalid, "event %s: %v", e.ID, err)
			}
			priceID, currency = &p.ID, p.Currency
		}
		u := e.Usage
		c.id = append(c.id, e.ID)
		c.at = append(c.at, e.Time.UTC())
		c.customer = append(c.customer, e.CustomerID)
		c.key = append(c.key, e.KeyID)
		c.provider = append(c.provider, e.Provider)
		c.model = append(c.model, e.Model)
		c.served = append(c.served, e.ServedModel)
		c.endpoint = append(c.endpoint, e.Endpoint)
		c.stream = append(c.stream, e.Stream)
		c.status = append(c.status, e.Status)
		c.httpStatus = append(c.httpStatus, int32(e.HTTPStatus))
		c.finish = append(c.finish, e.FinishReason)
		c.prompt = append(c.prompt, u.PromptTokens)
		c.cached = append(c.cached, u.CachedTokens)
		c.cacheWrite = append(c.cacheWrite, u.CacheWriteTokens)
		c.completion = append(c.completion, u.CompletionTokens)
		c.reasoning = append(c.reasoning, u.ReasoningTokens)
		c.webSearch = append(c.webSearch, u.WebSearchRequests)
		c.source = append(c.source, e.UsageSource)
		c.ttft = append(c.ttft, e.TTFTMillis)
		c.duration = append(c.duration, e.DurationMillis)
		c.errText = append(c.errText, e.Error)
		c.priceID = append(c.priceID, priceID)
		c.currency = append(c.currency, currency)
		c.cost = append(c.cost, cost)
	}
	return c, nil
}

func (c *eventColumns) args() []any {
	return []any{c.id, c.at, c.customer, c.key, c.provider, c.model, c.served, c.endpoint,
		c.stream, c.status, c.httpStatus, c.finish, c.prompt, c.cached, c.cacheWrite,
		c.completion, c.reasoning, c.webSearch, c.source, c.ttft, c.duration, c.errText,
		c.priceID, c.currency, c.cost}
}
