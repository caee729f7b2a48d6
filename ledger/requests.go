package ledger

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RequestQuery selects one customer's stored events (its request log),
// newest first. CustomerID (a UUID) is required; KeyID (a UUID), Model and
// EndUser, when set, must match exactly; From and To bound the events' time ([From, To),
// UTC; zero: unbounded). Limit (0: the default, 50; at most 1000) and
// Cursor page through the events.
type RequestQuery struct {
	CustomerID, KeyID, Model, EndUser string
	From, To                          time.Time
	Limit                             int
	Cursor                            string
}

// RequestPage is one page of events, newest first; NextCursor is "" on
// the last page.
type RequestPage struct {
	Data       []RatedEvent `json:"data"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Requests returns a page of a customer's events, each as Event returns
// it (tokens by class, status, model, cost). Pages are cut by (time, id),
// so events stored while a client pages through do not shift the pages.
// It returns EInvalid for a customer or key id that is not a UUID, an empty time
// range, a limit out of range, or a cursor it did not return.
func (s *Store) Requests(ctx context.Context, q RequestQuery) (RequestPage, error) {
	if q.Limit == 0 {
		q.Limit = 50
	}
	switch {
	case q.Limit < 1 || q.Limit > 1000:
		return RequestPage{}, errorf(EInvalid, "limit: %d is not between 1 and 1000", q.Limit)
	case !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To):
		return RequestPage{}, errorf(EInvalid, "from must be before to")
	}
	if err := checkFilters(q.Model, q.EndUser); err != nil {
		return RequestPage{}, err
	}
	customer, err := optionalUUID("customer_id", q.CustomerID)
	if err != nil {
		return RequestPage{}, err
	}
	if customer == "" {
		return RequestPage{}, errorf(EInvalid, "customer_id is required")
	}
	key, err := optionalUUID("key_id", q.KeyID)
	if err != nil {
		return RequestPage{}, err
	}
	from, to := ceilMicrosecond(q.From), ceilMicrosecond(q.To) // the stored times of [from, to): see Store.Usage
	if from.IsZero() {
		from = time.Unix(0, 0)
	}
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	// Before the cursor's event: its time, and its id among events of
	// the same time. No cursor: before the end of time.
	beforeTime, beforeID := to, uuid.Max.String()
	if q.Cursor != "" {
		at, id, err := decodeRequestCursor(q.Cursor)
		if err != nil {
			return RequestPage{}, err
		}
		beforeTime, beforeID = at, id
	}
	// Only the filters given are in the query's text: pgx prepares a query
	// once per connection, and after five executions Postgres may plan it
	// once for any parameters (a generic plan), in which a filter written
	// ($5 = '' OR e.end_user = $5) cannot use its index: every page by end
	// user then read every event of the customer (5.4-8 s for one with
	// 4,000,000 events). Each combination of filters is a query of its own.
	where := ""
	if q.Model != "" {
		where += ` AND e.model = $4`
	} else {
		where += ` AND $4 = ''`
	}
	if q.EndUser != "" {
		where += ` AND e.end_user = $5`
	} else {
		where += ` AND $5 = ''`
	}
	if key != "" {
		where += ` AND e.key_id = $9::uuid`
	} else {
		where += ` AND $9 = ''`
	}
	args := []any{customer, from, to, q.Model, q.EndUser, beforeTime, beforeID, q.Limit + 1, key}
	page := RequestPage{Data: []RatedEvent{}}
	if (key != "" || q.Model != "") && q.EndUser == "" {
		if err := s.rollupRequests(ctx, &page, where, args); err != nil {
			return RequestPage{}, dbError(err, "requests")
		}
	} else if err := s.readRequests(ctx, &page, selectEvents+`
		WHERE e.customer_id = $1 AND e.occurred_at >= $2 AND e.occurred_at < $3`+where+`
		  AND (e.occurred_at, e.id) < ($6, $7::uuid)
		ORDER BY e.occurred_at DESC, e.id DESC LIMIT $8`, args...); err != nil {
		return RequestPage{}, dbError(err, "requests")
	}
	if len(page.Data) > q.Limit {
		last := page.Data[q.Limit-1]
		page.Data = page.Data[:q.Limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString(
			[]byte(last.Time.UTC().Format(time.RFC3339Nano) + " " + last.ID))
	}
	return page, nil
}

// readRequests appends the events query reads to page.
func (s *Store) readRequests(ctx context.Context, page *RequestPage, query string, args ...any) error {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanEvent(rows)
		if err != nil {
			return err
		}
		page.Data = append(page.Data, r)
	}
	return rows.Err()
}

// rollupHours is how many hours rollupRequests reads the events of at
// once.
const rollupHours = 48

// rollupRequests reads a page of a customer's events of one key, one
// model or both (Requests' args: $9 the key, $4 the model, $8 the events
// wanted) hour by hour: the hours its rollups hold such events in, newest
// first, rollupHours at a time (by key: usage_hourly_key_idx; by model
// alone: the customer's rollup rows), and in each the customer's events
// of that hour (usage_events' customer and time index). There is no
// index of the events by key or model (each would cost every event's
// write): walking the customer's events newest first and keeping the
// key's read every event of the customer for a key with few of them
// (6-10 s for a customer with 4 million events, a review), and for a
// model it never used.
func (s *Store) rollupRequests(ctx context.Context, page *RequestPage, where string, args []any) error {
	key, model := `key_id = $1::uuid`, ` AND $5 = ''`
	if args[8] == "" {
		key = `$1 = ''`
	}
	if args[3] != "" {
		model = ` AND model = $5`
	}
	want := args[7].(int)
	before := args[5].(time.Time)
	for {
		rows, err := s.pool.Query(ctx, `SELECT DISTINCT hour FROM usage_hourly
			WHERE `+key+` AND customer_id = $2 AND hour >= date_trunc('hour', $3::timestamptz) AND hour < $4 AND hour <= $6`+model+`
			ORDER BY hour DESC LIMIT `+strconv.Itoa(rollupHours), args[8], args[0], args[1], args[2], args[3], before)
		if err != nil {
			return err
		}
		hours, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil || len(hours) == 0 {
			return err
		}
		batch := append(slices.Clone(args), hours) // $10
		batch[7] = want - len(page.Data)
		if err := s.readRequests(ctx, page, selectEvents+`
			JOIN unnest($10::timestamptz[]) h(hour) ON e.occurred_at >= h.hour AND e.occurred_at < h.hour + interval '1 hour'
			WHERE e.customer_id = $1 AND e.occurred_at >= $2 AND e.occurred_at < $3`+where+`
			  AND (e.occurred_at, e.id) < ($6, $7::uuid)
			ORDER BY e.occurred_at DESC, e.id DESC LIMIT $8`, batch...); err != nil {
			return err
		}
		if len(page.Data) >= want || len(hours) < rollupHours {
			return nil
		}
		before = hours[len(hours)-1].Add(-time.Microsecond) // the hours before this batch's oldest
	}
}

// decodeRequestCursor returns the time and id of the event a page of
// Requests ended with.
func decodeRequestCursor(c string) (time.Time, string, error) {
	bad := errorf(EInvalid, "cursor: %q is not a cursor this API returned", c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", bad
	}
	at, id, ok := strings.Cut(string(b), " ")
	t, terr := time.Parse(time.RFC3339Nano, at)
	if _, uerr := uuid.Parse(id); !ok || terr != nil || uerr != nil || len(id) != 36 {
		return time.Time{}, "", bad
	}
	return t, id, nil
}
