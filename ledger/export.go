package ledger

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ExportColumns is the header of ExportLines' CSV. A row is an "event"
// (record) or an "entry"; the columns that do not apply are empty.
//
//   - time: the event's occurred_at or the entry's effective_at, RFC 3339
//     UTC with microseconds.
//   - event_id: the event; for an entry, the event it re-rates or refunds.
//   - entry_id, kind (credit, adjustment, refund, rerate), amount, memo,
//     reverses: the entry. amount is positive in the customer's favour; a
//     rerate entry's amount is minus the change of its event's charge.
//   - token classes, price_id, override_id, unpriced (true/false),
//     discount_bp (basis points): the event.
//   - list_cost (before discount) and charge = list_cost × (10000 −
//     discount_bp) / 10000, as first rated: the event. (An event's cost,
//     what the customer is charged for it, is its charge less the amounts
//     of its rerate entries.) A rerate entry's list_cost is the change it
//     made to its event's list cost, and its price_id, override_id and
//     discount_bp the terms that re-rated it (empty on entries made before
//     migration 12).
//   - corrections: the event's corrections (docs/billing.md,
//     "Corrections"), comma-separated: what the gateway or the meter
//     changed before storing it (counts clamped, a time moved), so that
//     figures the ledger altered are told from a provider's.
//   - recorded_at: when the ledger wrote the row (the event's recorded_at,
//     the entry's created_at), RFC 3339 UTC with microseconds. A row
//     recorded after a period was closed (a late event, a re-rating, a
//     backdated credit) is one that moved its statement: filter on it to
//     see what changed since an export or an invoice.
//
// Money (list_cost, charge, amount) is an exact decimal string in currency
// units, never rounded. A period's charges are the sum of its events'
// charges less the sum of its rerate entries' amounts; its list cost, the
// sum of the events' and the rerate entries' list_cost. A text cell (model,
// memo, …) that starts with = + - @, tab or carriage return is prefixed
// with ' (see csvText).
var ExportColumns = []string{"record", "time", "event_id", "entry_id", "customer_id", "key_id", "model",
	"provider", "status", "usage_source", "prompt_tokens", "cached_tokens", "cache_write_tokens",
	"completion_tokens", "reasoning_tokens", "web_search_requests", "price_id", "override_id", "unpriced",
	"currency", "list_cost", "discount_bp", "charge", "kind", "amount", "memo", "reverses", "corrections", "recorded_at"}

// exportCopy selects ExportColumns over [%[1]s, %[2]s), its text columns
// neutralised by csvTextSQL (%[3]s to %[12]s). Multiplying by a power of
// ten keeps numeric exact where dividing would round.
const exportCopy = `COPY (
  SELECT 'event' AS record, to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "time",
    e.id AS event_id, NULL::bigint AS entry_id, e.customer_id, e.key_id, %[3]s AS model, %[4]s AS provider,
    %[5]s AS status, %[6]s AS usage_source, e.prompt_tokens, e.cached_tokens, e.cache_write_tokens,
    e.completion_tokens, e.reasoning_tokens, e.web_search_requests, e.price_id, e.override_id, e.unpriced::text AS unpriced,
    %[7]s AS currency, trim_scale(e.cost_e12 * 0.000000000001)::text AS list_cost, e.discount_bp,
    trim_scale(e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0000000000000001)::text AS charge,
    NULL AS kind, NULL AS amount, NULL AS memo, NULL::bigint AS reverses, %[12]s AS corrections,
    to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS recorded_at
  FROM usage_events e WHERE e.occurred_at >= %[1]s AND e.occurred_at < %[2]s
  UNION ALL
  SELECT 'entry', to_char(l.effective_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), l.event_id,
    l.id, l.customer_id, l.key_id, %[8]s, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    l.price_id, l.override_id, NULL, %[9]s, trim_scale(l.cost_e12 * 0.000000000001)::text, l.discount_bp, NULL, %[10]s,
    trim_scale(l.amount_e12 * 0.000000000001)::text, %[11]s, l.reverses, NULL,
    to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
  FROM ledger_entries l WHERE l.effective_at >= %[1]s AND l.effective_at < %[2]s
) TO STDOUT WITH (FORMAT csv, HEADER)`

// progressEvery is how many lines pass between calls of an export's
// progress hook.
const progressEvery = 10_000

// MaxExports is how many exports (ExportLines) a Store runs at once; one
// more is refused (EUnavailable). Each runs on a connection of its own,
// outside the pool, for as long as its reader takes: an export whose
// client reads slowly, or stops, holds that connection and a snapshot,
// never a connection the meter, the key sync or the API need (a finance
// review: four stalled downloads took the pool's four connections, and
// metering and statements stopped).
const MaxExports = 4

// ExportLines writes every ledger line in [from, to) to w as CSV with a
// header (ExportColumns): each usage event by occurred_at (partitions
// outside the range are not read) and each ledger entry by effective_at,
// in no particular order (sort by time downstream). The rows stream from
// Postgres (COPY) through w in constant memory, from one snapshot. progress, optional, is called every
// 10,000 lines and at the end with the rows so far (counted by newlines,
// so a memo with line breaks overcounts; the returned count is exact).
//
// It returns rows written (without the header), EInvalid when from is not
// before to, EUnavailable when MaxExports exports are running, and an
// error after a partial write when w or the database fails mid-stream (a
// writer that returns an error ends the export and its connection).
func (s *Store) ExportLines(ctx context.Context, from, to time.Time, w io.Writer, progress ...func(rows int64)) (rows int64, err error) {
	// A zero from is a bound: the first instant of the year 0001, the
	// earliest the API takes (from=0001-01-01), not a missing one.
	if to.IsZero() || !from.Before(to) {
		return 0, errorf(EInvalid, "from and to are required, with from before to")
	}
	// Stored times are whole microseconds: bounds rounded up to one hold
	// the same stored times as [from, to) (see Store.Usage).
	from, to = ceilMicrosecond(from), ceilMicrosecond(to)
	select {
	case s.exports <- struct{}{}:
		defer func() { <-s.exports }()
	default:
		return 0, errorf(EUnavailable, "%d exports are running, the most at once; retry when one ends", MaxExports)
	}
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // a stalled COPY's session ends with its connection
	}()
	lw := &lineWriter{w: w, progress: progress}
	tag, err := conn.PgConn().CopyTo(ctx, lw, fmt.Sprintf(exportCopy, sqlTime(from), sqlTime(to),
		csvTextSQL("e.model"), csvTextSQL("e.provider"), csvTextSQL("e.status"), csvTextSQL("e.usage_source"),
		csvTextSQL("e.currency"), csvTextSQL("l.model"), csvTextSQL("l.currency"), csvTextSQL("l.kind"),
		csvTextSQL("l.memo"), csvTextSQL("e.corrections")))
	if err != nil {
		return max(lw.lines-1, 0), fmt.Errorf("export: %w", err)
	}
	for _, p := range progress {
		p(tag.RowsAffected())
	}
	return tag.RowsAffected(), nil
}

// sqlTime is t as a SQL timestamptz literal, to the microsecond (t is
// whole microseconds: ExportLines rounds its bounds up); it is made from a
// time.Time, never from user text, so it cannot inject.
func sqlTime(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02T15:04:05.999999Z07:00") + "'::timestamptz"
}

// csvText neutralises a text cell of a CSV the product writes against
// formula injection (OWASP's "CSV Injection"): a spreadsheet evaluates a
// cell that starts with = + - @, tab or carriage return as a formula, so
// such a cell gets a leading single quote, which spreadsheets show as text
// (and a reader of the file can strip). Numeric columns (amounts, counts)
// never pass through it: a negative amount stays a number.
func csvText(s string) string {
	if s != "" && strings.IndexByte("=+-@\t\r", s[0]) >= 0 {
		return "'" + s
	}
	return s
}

// csvTextSQL is csvText in SQL, for column col of the export's COPY; col
// is a column name from this file, never user text.
func csvTextSQL(col string) string {
	return "CASE WHEN left(" + col + ", 1) IN ('=', '+', '-', '@', chr(9), chr(13)) THEN '''' || " + col +
		" ELSE " + col + " END"
}

// lineWriter passes writes through, counting lines for the progress hooks.
type lineWriter struct {
	w        io.Writer
	progress []func(rows int64)
	lines    int64
	reported int64
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	if len(l.progress) > 0 && l.lines-l.reported >= progressEvery {
		l.reported = l.lines
		for _, f := range l.progress {
			f(l.lines - 1) // less the header
		}
	}
	return n, err
}

// StatementColumns is the header of Statement.WriteCSV. record is "line"
// (kind usage, adjustment, refund, rounding), "total" (kind exact or
// rounded), "payment" (kind credit or credit_reversal), "balance" (kind
// opening, credits, charges, closing) or "unpriced" (kind usage, no
// currency). Amounts are the JSON's decimal strings. A text cell (memo,
// model, …) that starts with = + - @, tab or carriage return is prefixed
// with ' (see csvText).
var StatementColumns = []string{"customer_id", "period", "currency", "record", "kind", "model", "entry_id",
	"event_id", "effective_at", "memo", "requests", "prompt_tokens", "cached_tokens", "cache_write_tokens",
	"completion_tokens", "reasoning_tokens", "web_search_requests", "amount"}

// statementTextColumns are StatementColumns' text columns, which WriteCSV
// neutralises (csvText): all but entry_id, the counts and amount.
var statementTextColumns = []int{0, 1, 2, 3, 4, 5, 7, 8, 9}

// WriteCSV renders the statement as CSV (StatementColumns), in the order
// of the JSON: each section's lines, totals, payments and balances, then
// the unpriced usage. It returns w's error.
func (st Statement) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(StatementColumns)
	row := func(cur, record, kind, amount string, l *StatementLine) {
		r := []string{st.CustomerID, st.Period, cur, record, kind, "", "", "", "", "", "", "", "", "", "", "", "", amount}
		if l != nil {
			r[5], r[7], r[9] = l.Model, l.EventID, l.Memo
			if l.EntryID != 0 {
				r[6] = strconv.FormatInt(l.EntryID, 10)
			}
			if l.EffectiveAt != nil {
				r[8] = l.EffectiveAt.UTC().Format(time.RFC3339Nano)
			}
			if u := l.Usage; u != nil {
				for i, n := range []int64{u.Requests, u.PromptTokens, u.CachedTokens, u.CacheWriteTokens,
					u.CompletionTokens, u.ReasoningTokens, u.WebSearchRequests} {
					r[10+i] = strconv.FormatInt(n, 10)
				}
			}
		}
		for _, i := range statementTextColumns {
			r[i] = csvText(r[i])
		}
		_ = cw.Write(r)
	}
	for _, s := range st.Sections {
		for i := range s.Lines {
			row(s.Currency, "line", s.Lines[i].Kind, s.Lines[i].Amount, &s.Lines[i])
		}
		row(s.Currency, "total", "exact", s.ExactTotal, nil)
		row(s.Currency, "total", "rounded", s.Total, nil)
		for i := range s.Payments {
			row(s.Currency, "payment", s.Payments[i].Kind, s.Payments[i].Amount, &s.Payments[i])
		}
		for _, b := range [][2]string{{"opening", s.OpeningBalance}, {"credits", s.Credits},
			{"charges", s.Charges}, {"closing", s.ClosingBalance}} {
			row(s.Currency, "balance", b[0], b[1], nil)
		}
	}
	for i := range st.Unpriced {
		row("", "unpriced", st.Unpriced[i].Kind, st.Unpriced[i].Amount, &st.Unpriced[i])
	}
	cw.Flush()
	return cw.Error()
}
