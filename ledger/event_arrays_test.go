package ledger

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The way WriteEvents sent batches before the staging table, kept to be
// measured against it (BenchmarkMeterWrite, write=array) and held to the
// same ledger by TestStagedWriteMatchesArray: one statement over 35 column
// arrays, unnested.

// WriteEventsArraysForTest is WriteEvents with each batch sent as column
// arrays.
func (s *Store) WriteEventsArraysForTest(ctx context.Context, events []usage.Event) (int, error) {
	return s.writeEvents(ctx, events, writeArrays)
}

// writeArrays sends a rated batch as one statement of column arrays
// (writeBatch).
func writeArrays(ctx context.Context, tx pgx.Tx, events []usage.Event, p *pricing) (n, unpriced int, err error) {
	cols, err := newEventColumns(events, p)
	if err != nil {
		return 0, 0, err
	}
	err = tx.QueryRow(ctx, writeBatch, cols.args()...).Scan(&n, &unpriced)
	return n, unpriced, err
}

// writeBatch is batchCTEs over the batch as 35 arrays, one per column (see
// eventColumns); $36 is the duplicates within the batch.
var writeBatch = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::text[], $6::text[],
    $7::text[], $8::text[], $9::boolean[], $10::text[], $11::integer[], $12::text[], $13::bigint[],
    $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::text[],
    $20::bigint[], $21::bigint[], $22::text[], $23::bigint[], $24::bigint[], $25::text[], $26::bigint[],
    $27::integer[], $28::boolean[], $29::text[], $30::text[], $31::text[]::jsonb[], $32::text[], $33::integer[],
    $34::boolean[], $35::uuid[])
  AS t(` + eventColumnList + `, deployment, attempt, charged, request_id)
), ` + batchCTEs("input", "$36::bigint + (SELECT count(*) FROM input)")

// eventColumns is a batch of rated events laid out column by column.
type eventColumns struct {
	// The UUIDs parsed here: pgx has no binary encoding of a []string as
	// uuid[], and its fallback (formatting the whole array into an error,
	// then sending text) cost more than the rest of the batch's encoding.
	id, customer, key                                                                   []pgtype.UUID
	provider, model, served, endpoint, status, finish, source, errText, currency, fixes []string
	endUser, deployment                                                                 []string
	attempt                                                                             []int32
	charged                                                                             []bool
	requestID                                                                           []pgtype.UUID // invalid (NULL) when none
	metadata                                                                            []*string     // JSON objects
	at                                                                                  []time.Time
	stream, unpriced                                                                    []bool
	httpStatus, discount                                                                []int32
	prompt, cached, cacheWrite, completion, reasoning, webSearch, ttft, duration, cost  []int64
	priceID, overrideID                                                                 []*int64
	duplicates                                                                          int64
}

// newEventColumns rates events and lays them out as columns. An id repeated
// within the batch keeps its first occurrence and counts as a duplicate.
func newEventColumns(events []usage.Event, p *pricing) (*eventColumns, error) {
	n := len(events)
	str := func() []string { return make([]string, 0, n) }
	i64 := func() []int64 { return make([]int64, 0, n) }
	ids := func() []pgtype.UUID { return make([]pgtype.UUID, 0, n) }
	c := &eventColumns{id: ids(), customer: ids(), key: ids(), provider: str(), model: str(), served: str(),
		endpoint: str(), status: str(), finish: str(), source: str(), errText: str(), currency: str(), fixes: str(),
		endUser: str(), metadata: make([]*string, 0, n), deployment: str(), attempt: make([]int32, 0, n),
		charged: make([]bool, 0, n), requestID: ids(),
		at: make([]time.Time, 0, n), stream: make([]bool, 0, n), unpriced: make([]bool, 0, n),
		httpStatus: make([]int32, 0, n), discount: make([]int32, 0, n),
		prompt: i64(), cached: i64(), cacheWrite: i64(), completion: i64(), reasoning: i64(), webSearch: i64(),
		ttft: i64(), duration: i64(), cost: i64(), priceID: make([]*int64, 0, n), overrideID: make([]*int64, 0, n)}
	seen := make(map[string]struct{}, len(events))
	for i := range events {
		e := &events[i]
		if _, dup := seen[e.ID]; dup {
			c.duplicates++
			continue
		}
		seen[e.ID] = struct{}{}
		r, err := p.rate(e)
		if err != nil {
			return nil, err
		}
		id, customer, key, err := eventUUIDs(e)
		if err != nil {
			return nil, err
		}
		u := e.Usage
		c.id = append(c.id, id)
		c.at = append(c.at, e.Time.UTC())
		c.customer = append(c.customer, customer)
		c.key = append(c.key, key)
		c.provider = append(c.provider, e.Provider)
		c.model = append(c.model, e.Model)
		c.served = append(c.served, e.ServedModel)
		c.endpoint = append(c.endpoint, e.Endpoint)
		c.stream = append(c.stream, e.Stream)
		c.status = append(c.status, string(e.Status))
		c.httpStatus = append(c.httpStatus, int32(e.HTTPStatus))
		c.finish = append(c.finish, e.FinishReason)
		c.prompt = append(c.prompt, u.PromptTokens)
		c.cached = append(c.cached, u.CachedTokens)
		c.cacheWrite = append(c.cacheWrite, u.CacheWriteTokens)
		c.completion = append(c.completion, u.CompletionTokens)
		c.reasoning = append(c.reasoning, u.ReasoningTokens)
		c.webSearch = append(c.webSearch, u.WebSearchRequests)
		c.source = append(c.source, string(e.UsageSource))
		c.ttft = append(c.ttft, e.TTFTMillis)
		c.duration = append(c.duration, e.DurationMillis)
		c.errText = append(c.errText, e.Error)
		c.priceID = append(c.priceID, r.PriceID)
		c.overrideID = append(c.overrideID, r.OverrideID)
		c.currency = append(c.currency, r.Currency)
		c.cost = append(c.cost, r.CostE12)
		c.discount = append(c.discount, r.DiscountBP)
		c.unpriced = append(c.unpriced, r.Unpriced)
		c.fixes = append(c.fixes, e.Corrections)
		c.endUser = append(c.endUser, e.EndUser)
		c.metadata = append(c.metadata, metadataJSON(e.Metadata))
		c.deployment = append(c.deployment, e.Deployment)
		c.attempt = append(c.attempt, int32(max(e.Attempt, 1)))
		c.charged = append(c.charged, !e.NotCharged)
		var rid pgtype.UUID
		if u, err := uuid.Parse(e.RequestID); err == nil {
			rid = pgtype.UUID{Bytes: u, Valid: true}
		}
		c.requestID = append(c.requestID, rid)
	}
	return c, nil
}

func (c *eventColumns) args() []any {
	return []any{c.id, c.at, c.customer, c.key, c.provider, c.model, c.served, c.endpoint,
		c.stream, c.status, c.httpStatus, c.finish, c.prompt, c.cached, c.cacheWrite,
		c.completion, c.reasoning, c.webSearch, c.source, c.ttft, c.duration, c.errText,
		c.priceID, c.overrideID, c.currency, c.cost, c.discount, c.unpriced, c.fixes, c.endUser, c.metadata,
		c.deployment, c.attempt, c.charged, c.requestID, c.duplicates}
}
