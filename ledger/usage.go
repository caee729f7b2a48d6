package ledger

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Usage groupings accepted by UsageQuery.GroupBy: the SQL expression
// grouped by over usage_hourly, and how a group is shown (over g). Periods
// group on timestamps and are formatted once per group, not once per row.
var usageGroups = map[string][2]string{
	"model":    {"model", "g"},
	"key":      {"key_id::text", "g"},
	"customer": {"customer_id::text", "g"},
	"hour":     {"hour", `to_char(g AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:00:00"Z"')`},
	"day":      {"date_trunc('day', hour AT TIME ZONE 'UTC')", `to_char(g, 'YYYY-MM-DD')`},
	"month":    {"date_trunc('month', hour AT TIME ZONE 'UTC')", `to_char(g, 'YYYY-MM')`},
	"end_user": {"end_user", "g"}, // from the events: see usageFromEvents
	// From the events and the attempts not charged: see usageFromAttempts.
	"deployment": {"deployment", "g"},
	"provider":   {"provider", "g"},
}

// UsageQuery selects usage from the hourly rollups, or, to filter or
// group by end user (which the rollups do not keep), from the events of
// the range (bound it by customer and time: it reads every event it
// covers).
// Filters are optional except where noted; CustomerID and KeyID, when set,
// are UUIDs. From and To bound the events' times, [From, To): exactly
// when the query reads the events (group by end_user, deployment or
// provider, or an EndUser filter); otherwise the rollups hold whole UTC
// hours, so a From or To within an hour is counted from that hour's
// events, for one customer's usage (CustomerID set); across customers
// they must be whole hours (EInvalid otherwise: a range widened to whole
// hours would count usage outside it, and reading every customer's
// events of an hour is not indexed). GroupBy is "model" (the default),
// "key", "customer", "hour", "day", "month", "end_user", "deployment" or
// "provider"; the last two read the events and also the attempts not
// charged (failed and retried elsewhere: the operator's cost, counted in NotChargedRequests
// and at no charge), so that a provider's invoice can be reconciled
// deployment by deployment. EndUser filters by the end user
// the client named ("" matches every event). Limit (0: the default, 100; at most 1000) and
// Cursor page through the groups.
type UsageQuery struct {
	CustomerID, KeyID, Model string
	EndUser                  string
	From, To                 time.Time
	GroupBy                  string
	Limit                    int
	Cursor                   string
}

// UsageRow is one group's usage: token counts summed over Requests events,
// UnpricedRequests of them with no price in force (stored at cost 0), and
// Cost, the exact amount charged (after overrides, discounts and
// re-rating), as a decimal string in Currency. The group's value is in
// Group and in the field of its kind: Model, KeyID, CustomerID (with the
// customer's name, CustomerName), EndUser or Period. Events with no end
// user make the group "".
//
// A group is one row: its unpriced usage is counted in the row of its
// priced usage. Only real currencies split a group (usage priced in EUR
// and in USD makes two rows; the unpriced usage then joins the first by
// code). Currency is "" only for a group with no priced usage at all.
type UsageRow struct {
	Group        string `json:"group"`
	Model        string `json:"model,omitempty"`
	KeyID        string `json:"key_id,omitempty"`
	CustomerID   string `json:"customer_id,omitempty"`
	CustomerName string `json:"customer_name,omitempty"`
	EndUser      string `json:"end_user,omitempty"`
	Deployment   string `json:"deployment,omitempty"`
	Provider     string `json:"provider,omitempty"`
	Period       string `json:"period,omitempty"`
	Requests     int64  `json:"requests"`
	// NotChargedRequests counts the attempts among Requests that were not
	// charged: set, 0 included, when grouped by deployment or provider,
	// and nil otherwise.
	NotChargedRequests *int64 `json:"not_charged_requests,omitempty"`
	UnpricedRequests   int64  `json:"unpriced_requests"`
	PromptTokens       int64  `json:"prompt_tokens"`
	CachedTokens       int64  `json:"cached_tokens"`
	CacheWriteTokens   int64  `json:"cache_write_tokens"`
	CompletionTokens   int64  `json:"completion_tokens"`
	ReasoningTokens    int64  `json:"reasoning_tokens"`
	WebSearches        int64  `json:"web_search_requests"`
	Cost               string `json:"cost"`
	Currency           string `json:"currency"`
}

// UsagePage is one page of groups; NextCursor is "" on the last page.
type UsagePage struct {
	Data       []UsageRow `json:"data"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// usageSQL sums the rollups per group (%[1]s, an expression over
// usage_hourly) and currency, folds each group's unpriced row (the empty
// currency) into its row in the first real currency, if any, and shows the
// group (%[2]s, over g), paged by (shown group, currency).
const usageSQL = `
WITH grouped AS (
  SELECT %[1]s AS g, currency, sum(requests) AS requests, sum(unpriced_requests) AS unpriced,
    sum(prompt_tokens) AS prompt, sum(cached_tokens) AS cached, sum(cache_write_tokens) AS cache_write,
    sum(completion_tokens) AS completion, sum(reasoning_tokens) AS reasoning,
    sum(web_search_requests) AS web, sum(charge_e12) AS charge, sum(not_charged) AS not_charged
  FROM %[3]s
  WHERE ($1 = '' OR customer_id = NULLIF($1, '')::uuid) AND ($2 = '' OR key_id = NULLIF($2, '')::uuid) AND ($3 = '' OR model = $3)
    AND hour >= date_trunc('hour', $4::timestamptz) AND hour < $5
  GROUP BY 1, 2
), homed AS (
  SELECT g, CASE WHEN currency <> '' THEN currency
      ELSE coalesce(min(NULLIF(currency, '')) OVER (PARTITION BY g), '') END AS currency,
    requests, unpriced, prompt, cached, cache_write, completion, reasoning, web, charge, not_charged
  FROM grouped
), merged AS (
  SELECT g, currency, sum(requests) AS requests, sum(unpriced) AS unpriced, sum(prompt) AS prompt,
    sum(cached) AS cached, sum(cache_write) AS cache_write, sum(completion) AS completion,
    sum(reasoning) AS reasoning, sum(web) AS web, sum(charge) AS charge, sum(not_charged) AS not_charged
  FROM homed GROUP BY g, currency
), shown AS (
  SELECT %[2]s AS g, currency, requests, unpriced, prompt, cached, cache_write, completion, reasoning, web, charge,
    not_charged
  FROM merged
)
SELECT g, currency, requests, unpriced, prompt, cached, cache_write, completion, reasoning, web, charge::text,
  not_charged
FROM shown
WHERE $6::text IS NULL OR (g, currency) > ($6, $7::text)
ORDER BY g, currency LIMIT $8`

// usageFromEvents is usage_hourly's shape computed from the events, for
// the queries by end user ($9): each event rated as the rollups hold it,
// its charge after re-rating, and in its re-rating's currency when only
// re-rating priced it.
const usageFromEvents = `(` + chargedEvents + `) AS usage_hourly`

// usageRollups is the rollups with the attempts column usageSQL sums (none
// of the rollups' requests is an attempt not charged).
const usageRollups = `(SELECT *, 0 AS not_charged FROM usage_hourly) AS usage_hourly`

// usageMixed is the rollups of the whole hours of the range, [$10, $11),
// and the events of its parts within an hour, [$4, $10) and [$11, $5)
// (empty when the bound is whole), for a rollup grouping whose from or to
// is not a whole hour, of one customer ($1, required; $9, the end user
// filter of the other sources, is given empty). Each part names the
// customer and its own times, as an index reads them, and an edge
// event's rerate entries are found by its id, as Event finds them. The
// events were chargedEvents over the whole range less the whole hours:
// it read every rerate entry of the customer's range to join the few
// events of the edges (720 ms of 722 for a customer with 400,000
// re-rated events, a review), and, planned once for any parameters (a
// generic plan: pgx prepares the query, and after five executions
// Postgres may), every event of the range.
const usageMixed = `(SELECT customer_id, hour, key_id, model, currency, requests, unpriced_requests, prompt_tokens,
    cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens, web_search_requests, charge_e12,
    0 AS not_charged
  FROM usage_hourly WHERE customer_id = NULLIF($1, '')::uuid AND hour >= $10 AND hour < $11
  UNION ALL
  ` + edgeEvents + ` AND e.occurred_at >= $4 AND e.occurred_at < $10 AND e.occurred_at < $5
  UNION ALL
  ` + edgeEvents + ` AND e.occurred_at >= $11 AND e.occurred_at >= $4 AND e.occurred_at < $5) AS usage_hourly`

// edgeEvents is usage_hourly's shape computed from the customer's events
// ($1) of a part of an hour, whose times the caller adds (within [$4,
// $5), and within the part: a range within one hour has no whole hour,
// $10 = $11 the next), each with the rerate entries of its id dated in
// [$4, $5) (chargedEvents' rule).
const edgeEvents = `SELECT e.customer_id, date_trunc('hour', e.occurred_at) AS hour, e.key_id, e.model,
    coalesce(r.currency, e.currency) AS currency, 1 AS requests,
    (e.unpriced AND r.currency IS NULL)::int AS unpriced_requests, e.prompt_tokens, e.cached_tokens,
    e.cache_write_tokens, e.completion_tokens, e.reasoning_tokens, e.web_search_requests,
    e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001 - coalesce(r.amount, 0) AS charge_e12, 0 AS not_charged
  FROM usage_events e LEFT JOIN LATERAL (SELECT max(currency) AS currency, sum(amount_e12) AS amount
    FROM ledger_entries WHERE event_id = e.id AND kind = 'rerate' AND effective_at >= $4 AND effective_at < $5) r ON true
  WHERE e.customer_id = NULLIF($1, '')::uuid AND $9 = ''`

// usageFromAttempts is usageFromEvents with the attempts not charged
// added, at no charge, for the groupings by deployment and provider.
const usageFromAttempts = `(` + chargedEvents + `
  UNION ALL
  SELECT a.customer_id, date_trunc('hour', a.occurred_at), a.key_id, a.model, '' AS end_user, '' AS currency,
    1, 0, a.prompt_tokens, a.cached_tokens, a.cache_write_tokens, a.completion_tokens, a.reasoning_tokens,
    a.web_search_requests, 0::numeric, a.deployment, a.provider, 1
  FROM usage_attempts a
  WHERE ($1 = '' OR a.customer_id = NULLIF($1, '')::uuid) AND $9 = ''
    AND a.occurred_at >= $4 AND a.occurred_at < $5) AS usage_hourly`

// chargedEvents is usage_hourly's shape computed from the events, with
// each event's deployment and provider. An event's rerate entries are
// dated at the event's time (rerateOne): those of the range are read
// once, by time (ledger_entries_effective_idx, or the customer's index),
// and joined; a probe of ledger_entries for each event took 2.4 s for a
// month of a customer with 4 million events (a scale review).
const chargedEvents = `SELECT e.customer_id, date_trunc('hour', e.occurred_at) AS hour, e.key_id, e.model,
    e.end_user, coalesce(r.currency, e.currency) AS currency, 1 AS requests,
    (e.unpriced AND r.currency IS NULL)::int AS unpriced_requests, e.prompt_tokens, e.cached_tokens,
    e.cache_write_tokens, e.completion_tokens, e.reasoning_tokens, e.web_search_requests,
    e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001 - coalesce(r.amount, 0) AS charge_e12,
    e.deployment, e.provider, 0 AS not_charged
  FROM usage_events e LEFT JOIN (SELECT event_id, max(currency) AS currency, sum(amount_e12) AS amount
    FROM ledger_entries WHERE kind = 'rerate' AND effective_at >= $4 AND effective_at < $5
      AND ($1 = '' OR customer_id = NULLIF($1, '')::uuid) GROUP BY event_id) r ON r.event_id = e.id
  WHERE ($1 = '' OR e.customer_id = NULLIF($1, '')::uuid) AND ($9 = '' OR e.end_user = $9)
    AND e.occurred_at >= $4 AND e.occurred_at < $5`

// Usage sums usage per group. It returns EInvalid for an unknown grouping,
// a customer or key id that is not a UUID, an empty time range, a limit
// out of range, or a cursor this query did not return.
func (s *Store) Usage(ctx context.Context, q UsageQuery) (UsagePage, error) {
	if q.GroupBy == "" {
		q.GroupBy = "model"
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	group, ok := usageGroups[q.GroupBy]
	switch {
	case !ok:
		return UsagePage{}, errorf(EInvalid, "group_by: %q is not one of model, key, customer, hour, day, month, end_user, deployment, provider", q.GroupBy)
	case !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To):
		return UsagePage{}, errorf(EInvalid, "from must be before to")
	case q.Limit < 1 || q.Limit > 1000:
		return UsagePage{}, errorf(EInvalid, "limit: %d is not between 1 and 1000", q.Limit)
	}
	if err := checkFilters(q.Model, q.EndUser); err != nil {
		return UsagePage{}, err
	}
	var err error
	if q.CustomerID, err = optionalUUID("customer_id", q.CustomerID); err != nil {
		return UsagePage{}, err
	}
	if q.KeyID, err = optionalUUID("key_id", q.KeyID); err != nil {
		return UsagePage{}, err
	}
	afterGroup, afterCurrency, err := decodeCursor(q.Cursor, q.GroupBy)
	if err != nil {
		return UsagePage{}, err
	}
	var after [2]any // NULL: the first page (a page may end on the group "" in currency "")
	if q.Cursor != "" {
		after = [2]any{afterGroup, afterCurrency}
	}
	source := usageRollups
	switch {
	case q.GroupBy == "deployment" || q.GroupBy == "provider":
		source = usageFromAttempts
	case q.GroupBy == "end_user" || q.EndUser != "":
		source = usageFromEvents
	}
	// Stored times are whole microseconds, and pgx drops a bound's
	// nanoseconds: rounded up to the microsecond, [from, to) holds the
	// same stored times as the bounds given.
	from, to := ceilMicrosecond(q.From), ceilMicrosecond(q.To)
	if from.IsZero() {
		from = time.Unix(0, 0)
	}
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	args := []any{q.CustomerID, q.KeyID, q.Model, from, to, after[0], after[1], q.Limit + 1}
	if source == usageRollups && (!wholeHour(from) || !wholeHour(to)) {
		// The rollups hold whole hours: a bound within an hour is counted
		// from that hour's events, for one customer's (an index reads
		// them); across customers it would read every event of the hour.
		if q.CustomerID == "" {
			return UsagePage{}, notWholeHours(q.GroupBy, from, to)
		}
		source = usageMixed
		inner := [2]time.Time{from.Truncate(time.Hour), to.Truncate(time.Hour)}
		if !wholeHour(from) {
			inner[0] = inner[0].Add(time.Hour)
		}
		if inner[1].Before(inner[0]) { // within one hour: no whole hour, every event read
			inner[1] = inner[0]
		}
		args = append(args, "", inner[0], inner[1])
	} else if source != usageRollups {
		args = append(args, q.EndUser)
	}
	rows, err := s.pool.Query(ctx, fmt.Sprintf(usageSQL, group[0], group[1], source), args...)
	if err != nil {
		return UsagePage{}, dbError(err, "usage query")
	}
	defer rows.Close()
	page := UsagePage{Data: []UsageRow{}}
	for rows.Next() {
		var r UsageRow
		var cost string
		var notCharged int64
		if err := rows.Scan(&r.Group, &r.Currency, &r.Requests, &r.UnpricedRequests, &r.PromptTokens, &r.CachedTokens,
			&r.CacheWriteTokens, &r.CompletionTokens, &r.ReasoningTokens, &r.WebSearches, &cost, &notCharged); err != nil {
			return UsagePage{}, dbError(err, "usage query")
		}
		if r.Cost, err = FormatE12(cost); err != nil {
			return UsagePage{}, err
		}
		switch q.GroupBy {
		case "model":
			r.Model = r.Group
		case "key":
			r.KeyID = r.Group
		case "customer":
			r.CustomerID = r.Group
		case "end_user":
			r.EndUser = r.Group
		case "deployment":
			r.Deployment, r.NotChargedRequests = r.Group, &notCharged
		case "provider":
			r.Provider, r.NotChargedRequests = r.Group, &notCharged
		default:
			r.Period = r.Group
		}
		page.Data = append(page.Data, r)
	}
	if err := rows.Err(); err != nil {
		return UsagePage{}, dbError(err, "usage query")
	}
	if q.GroupBy == "customer" {
		if err := s.nameCustomers(ctx, page.Data); err != nil {
			return UsagePage{}, err
		}
	}
	if len(page.Data) > q.Limit {
		last := page.Data[q.Limit-1]
		page.Data = page.Data[:q.Limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(q.GroupBy + "\x00" + last.Group + "\x00" + last.Currency))
	}
	return page, nil
}

// ceilMicrosecond is t rounded up to a whole microsecond.
func ceilMicrosecond(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// wholeHour reports whether t is a whole UTC hour.
func wholeHour(t time.Time) bool { return t.Truncate(time.Hour).Equal(t) }

// notWholeHours is the refusal of a rollup query across customers whose
// from or to is not a whole UTC hour: the rollups cannot tell the minutes
// of an hour apart, widening the range to whole hours would count usage
// outside it, and the hour's events of every customer are not indexed by
// time alone.
func notWholeHours(groupBy string, from, to time.Time) error {
	name, t := "from", from
	if wholeHour(from) {
		name, t = "to", to
	}
	return errorf(EInvalid, "%s: usage by %s across customers is summed per UTC hour, so %s must be a whole UTC hour (like %s); "+
		"filter by customer_id (the CLI's --customer), group by end_user (or deployment or provider), or filter by end_user (--end-user), for exact times",
		name, groupBy, name, t.UTC().Truncate(time.Hour).Format(time.RFC3339))
}

// nameCustomers sets the CustomerName of rows grouped by customer.
func (s *Store) nameCustomers(ctx context.Context, rows []UsageRow) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.CustomerID
	}
	names := map[string]string{}
	res, err := s.pool.Query(ctx, `SELECT id::text, name FROM customers WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return dbError(err, "usage query")
	}
	defer res.Close()
	for res.Next() {
		var id, name string
		if err := res.Scan(&id, &name); err != nil {
			return dbError(err, "usage query")
		}
		names[id] = name
	}
	if err := res.Err(); err != nil {
		return dbError(err, "usage query")
	}
	for i := range rows {
		rows[i].CustomerName = names[rows[i].CustomerID]
	}
	return nil
}

// decodeCursor returns the group and currency a page ends with, from a
// cursor Usage returned for the same grouping.
func decodeCursor(c, groupBy string) (group, currency string, err error) {
	if c == "" {
		return "", "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.Split(string(b), "\x00")
	switch {
	case err != nil || len(parts) != 3 || !utf8.Valid(b):
		return "", "", errorf(EInvalid, "cursor: %q is not a cursor this API returned", c)
	case parts[0] != groupBy:
		return "", "", errorf(EInvalid, "cursor: %q continues a query with group_by=%s, not %s", c, parts[0], groupBy)
	}
	return parts[1], parts[2], nil
}

// optionalUUID returns s, when not empty, in its canonical form, or
// EInvalid naming field.
func optionalUUID(field, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return "", errorf(EInvalid, "%s: %q is not a UUID", field, s)
	}
	return u.String(), nil
}

// checkFilters returns EInvalid unless a model and an end user to filter
// by could be stored ones: valid UTF-8, no NUL, within the event's limits.
func checkFilters(model, endUser string) error {
	if err := usage.CheckString(model, usage.MaxModelLen); err != nil {
		return errorf(EInvalid, "model: %v", err)
	}
	if err := usage.CheckString(endUser, usage.MaxEndUserLen); err != nil {
		return errorf(EInvalid, "end_user: %v", err)
	}
	return nil
}
