package ledger_test

// Scale review (rv-scale): the ledger's reads of one customer's month, of
// an hour's reconciliation, of a day's export must read what they answer
// for, not the whole history of the ledger or of the customer. Each test
// fills a year of one busy customer's ledger (12 monthly partitions) and
// counts the rows Postgres reads (pg_stat_user_tables and
// pg_stat_user_indexes) while one Store call runs, or asks for the plan.

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

const (
	yearCustomer = "00000000-0000-0000-0000-00000000000c"
	yearBusyKey  = "00000000-0000-0000-0001-00000000000a"
	yearQuietKey = "00000000-0000-0000-0001-00000000000b"
	// yearPerMonth events of the busy key a month, 12 months of 2025; the
	// quiet key has 5 events, in January.
	yearPerMonth = 3000
)

// yearFill is a year of the busy customer: events, their ids, their
// rollups and balance, a credit a month, and a rerate entry for every
// third event (as a re-rating of the year leaves: an entry per event).
const yearFill = `
INSERT INTO customers (id, name) VALUES ('` + yearCustomer + `', 'year');
INSERT INTO api_keys (id, customer_id, prefix, secret_hash) VALUES
  ('` + yearBusyKey + `', '` + yearCustomer + `', 'tg-a', sha256('a')),
  ('` + yearQuietKey + `', '` + yearCustomer + `', 'tg-b', sha256('b'));
DO $$
DECLARE m timestamptz;
BEGIN
  FOR m IN SELECT generate_series(timestamptz '2025-01-01 00:00Z', '2025-12-01 00:00Z', interval '1 month') LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF usage_events FOR VALUES FROM (%L) TO (%L)',
      'usage_events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'), m, m + interval '1 month');
  END LOOP;
END $$;
INSERT INTO usage_events (id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint, stream,
  status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens,
  reasoning_tokens, web_search_requests, usage_source, ttft_ms, duration_ms, error, price_id, currency, cost_e12)
SELECT gen_random_uuid(), t, '` + yearCustomer + `', k, 'openai', 'm' || (n % 3), 'm' || (n % 3), '/v1/chat/completions',
  false, 'ok', 200, 'stop', 10, 0, 0, 5, 0, 0, 'upstream', 1, 1, '', NULL, 'USD', 1000
FROM (SELECT n, timestamptz '2025-01-01 00:00Z' + (n - 1) * (interval '365 days' / (12 * ` + "3000" + `)) AS t,
        '` + yearBusyKey + `'::uuid AS k FROM generate_series(1, 12 * 3000) n
      UNION ALL
      SELECT 100000 + n, timestamptz '2025-01-02 00:00Z' + n * interval '1 minute', '` + yearQuietKey + `'::uuid
      FROM generate_series(1, 5) n) x;
INSERT INTO event_ids (id, occurred_at) SELECT id, occurred_at FROM usage_events;
INSERT INTO usage_hourly
SELECT customer_id, date_trunc('hour', occurred_at), key_id, model, currency, count(*), 0, sum(prompt_tokens),
  sum(cached_tokens), sum(cache_write_tokens), sum(completion_tokens), sum(reasoning_tokens),
  sum(web_search_requests), sum(cost_e12), sum(cost_e12)
FROM usage_events GROUP BY 1, 2, 3, 4, 5;
INSERT INTO ledger_entries (customer_id, kind, amount_e12, currency, effective_at, memo)
SELECT '` + yearCustomer + `', 'credit', 1000000000000000, 'USD', m, 'monthly credit'
FROM generate_series(timestamptz '2025-01-01 00:00Z', '2025-12-01 00:00Z', interval '1 month') m;
INSERT INTO ledger_entries (customer_id, kind, amount_e12, currency, effective_at, event_id, key_id, model, cost_e12)
SELECT customer_id, 'rerate', 0, 'USD', occurred_at, id, key_id, model, 0
FROM usage_events WHERE prompt_tokens = 10 AND (extract(epoch FROM occurred_at)::bigint / 60) % 3 = 0;
INSERT INTO customer_balances (customer_id, currency, credits_e12, charges_e12)
SELECT '` + yearCustomer + `', 'USD', (SELECT sum(amount_e12) FROM ledger_entries WHERE kind = 'credit'),
  (SELECT sum(charge_e12) FROM usage_hourly);
`

// newYearLedger returns the URL of a fresh migrated database holding
// yearFill, vacuumed and analyzed.
func newYearLedger(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	_, url := ledgertest.NewStoreURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{yearFill, `VACUUM ANALYZE`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// rowsRead runs f with a Store of its own on the database at url and
// returns the rows Postgres read from the tables whose names start with
// table (usage_events: every partition) meanwhile: rows read by
// sequential scans, rows fetched by index and bitmap scans, and index
// entries read (index-only scans). A backend's counters reach the
// statistics when it ends, so f's Store is closed before they are read.
func rowsRead(t *testing.T, url, table string, f func(ctx context.Context, s *ledger.Store)) int64 {
	t.Helper()
	return statDelta(t, url, table, `SELECT
		(SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0) FROM pg_stat_user_tables WHERE relname LIKE $1 || '%')
		+ (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname LIKE $1 || '%')`, f)
}

// indexScans is rowsRead's count of the index scans (each probe of an
// index is one) of the tables whose names start with table.
func indexScans(t *testing.T, url, table string, f func(ctx context.Context, s *ledger.Store)) int64 {
	t.Helper()
	return statDelta(t, url, table, `SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_tables WHERE relname LIKE $1 || '%'`, f)
}

// statDelta runs f as rowsRead does and returns how much the statistic
// stat (a query of one number, $1 the table prefix) grew meanwhile.
func statDelta(t *testing.T, url, table, stat string, f func(ctx context.Context, s *ledger.Store)) int64 {
	t.Helper()
	ctx := context.Background()
	read := func() int64 {
		conn, err := pgx.Connect(ctx, strings.Split(url, "&pool_max_conns")[0])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int64
		err = conn.QueryRow(ctx, stat, table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The counters settle once every backend that read has ended.
	settled := func() int64 {
		last := read()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			time.Sleep(700 * time.Millisecond)
			n := read()
			if n == last {
				return n
			}
			last = n
		}
		return last
	}
	before := settled()
	s, err := ledger.OpenExisting(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	f(ctx, s)
	s.Close()
	return settled() - before
}

// TestStatementReadsItsPeriodNotTheCustomersHistory: a statement of a
// month reads that month's rollups; its opening balance summed every
// rollup row of the customer before the month (statement.go,
// readOpening), so the statement of a customer's 13th month read 12
// months of rollups, and the cost of a statement grew with the
// customer's age.
func TestStatementReadsItsPeriodNotTheCustomersHistory(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t)
	var st ledger.Statement
	n := rowsRead(t, url, "usage_hourly", func(ctx context.Context, s *ledger.Store) {
		var err error
		if st, err = s.Statement(ctx, yearCustomer, "2025-12"); err != nil {
			t.Fatal(err)
		}
	})
	if len(st.Sections) != 1 || st.Sections[0].OpeningBalance == "0" {
		t.Fatalf("statement: %+v", st.Sections)
	}
	// The opening balance is the sums before the period, however read.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var want string
	if err := conn.QueryRow(context.Background(), `SELECT trim_scale(((SELECT sum(amount_e12) FROM ledger_entries
		WHERE kind <> 'rerate' AND effective_at < '2025-12-01Z') - (SELECT sum(charge_e12) FROM usage_hourly
		WHERE hour < '2025-12-01Z')) * 0.000000000001)::text`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got := st.Sections[0].OpeningBalance; got != want {
		t.Errorf("opening balance %s, want %s", got, want)
	}
	// December's rollups are at most yearPerMonth rows; read twice
	// (index entries and rows) that is 2 × yearPerMonth.
	if limit := int64(4 * yearPerMonth); n > limit {
		t.Errorf("the statement of 2025-12 read %d rollup rows (a month holds at most %d): it reads the customer's whole history (limit %d)",
			n, yearPerMonth, limit)
	}
}

// TestExportReadsItsPeriodsEntriesAlone: an export of a day read every
// ledger entry ever made (export.go: ledger_entries by effective_at, which
// no index leads with): a re-rating makes an entry per event, so the
// entries grow like the events, and every export, and every
// reconciliation (its rerate entries by effective_at), read them all.
func TestExportReadsItsPeriodsEntriesAlone(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t)
	from := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	var rows int64
	n := rowsRead(t, url, "ledger_entries", func(ctx context.Context, s *ledger.Store) {
		var err error
		if rows, err = s.ExportLines(ctx, from, from.AddDate(0, 0, 1), io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	if rows == 0 {
		t.Fatal("the export is empty")
	}
	if limit := int64(1000); n > limit {
		t.Errorf("an export of one day (%d lines) read %d ledger entries: every entry ever made (limit %d)", rows, n, limit)
	}
}

// TestRequestsByEndUserUseTheirIndexOnEveryCall: the request log's filters
// are written ($5 = ” OR e.end_user = $5), and pgx prepares each query
// once per connection: after five executions Postgres may plan the
// statement once for any parameters (a generic plan), in which the
// filter can no longer use usage_events_customer_end_user_idx, and every
// later page filtered by end user (or model, or key) read every event
// of the customer. On a 13,200,000-event ledger a big customer's page by
// end user took 18 ms as a custom plan and 5.4-8 s as the generic one.
func TestRequestsByEndUserUseTheirIndexOnEveryCall(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t) + "&pool_max_conns=1"
	if !strings.Contains(url, "?") {
		t.Fatalf("url %s", url)
	}
	n := rowsRead(t, url, "usage_events", func(ctx context.Context, s *ledger.Store) {
		for range 6 { // the first page of the log, as the portal opens it
			if _, err := s.Requests(ctx, ledger.RequestQuery{CustomerID: yearCustomer}); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			page, err := s.Requests(ctx, ledger.RequestQuery{CustomerID: yearCustomer, EndUser: "nobody"})
			if err != nil || len(page.Data) != 0 {
				t.Fatal(page, err)
			}
		}
	})
	// Six first pages read at most 6 × 51 rows (twice: index and heap);
	// an end user with no events, nothing.
	if limit := int64(2000); n > limit {
		t.Errorf("six first pages and three pages by end user read %d event rows: the end user's pages read the customer's every event (limit %d)", n, limit)
	}
}

// TestReconcileReadsItsRangeNotTheWholeLedger: the reconciliation of one
// hour checked balances by summing every event of every customer ever
// stored (reconcile.go, checkBalances): the console's reconciliation page
// (the last 24 hours, by default) read the whole usage_events table.
func TestReconcileReadsItsRangeNotTheWholeLedger(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t)
	from := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	var rec ledger.Reconciliation
	n := rowsRead(t, url, "usage_events", func(ctx context.Context, s *ledger.Store) {
		var err error
		if rec, err = s.Reconcile(ctx, from, from.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	})
	if rec.Events == 0 || rec.Events > 10 {
		t.Fatalf("events in the hour: %d", rec.Events)
	}
	// The hour holds a handful of events; the ledger 36,005.
	if limit := int64(1000); n > limit {
		t.Errorf("reconciling one hour (%d events) read %d event rows: it reads the whole ledger (limit %d)", rec.Events, n, limit)
	}
}

// TestRequestsOfAQuietKeyReadTheKeysEventsAlone: a customer's request
// log filtered by key (GET /v1/requests?key_id=, the console) walked the
// customer's events newest first (usage_events_customer_time_idx) and
// kept the key's: a page of a key with few events among the customer's
// many read every event of the customer, and so did a page by a model the
// customer never used (6-10 s for one with 4 million events, the scale
// review). They read the hours the rollups name (rollupRequests).
func TestRequestsOfAQuietKeyReadTheKeysEventsAlone(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t)
	for _, c := range []struct {
		name string
		q    ledger.RequestQuery
		want int
	}{
		{"a quiet key", ledger.RequestQuery{CustomerID: yearCustomer, KeyID: yearQuietKey}, 5},
		{"a model never used", ledger.RequestQuery{CustomerID: yearCustomer, Model: "never-used"}, 0},
	} {
		var page ledger.RequestPage
		n := rowsRead(t, url, "usage_events", func(ctx context.Context, s *ledger.Store) {
			var err error
			if page, err = s.Requests(ctx, c.q); err != nil {
				t.Fatal(err)
			}
		})
		if len(page.Data) != c.want {
			t.Fatalf("%s: %d requests, want %d", c.name, len(page.Data), c.want)
		}
		if limit := int64(1000); n > limit {
			t.Errorf("a page of %s (%d requests) read %d event rows: every event of its customer (limit %d)", c.name, c.want, n, limit)
		}
	}
}

// TestRequestsOfAKeyPageAsTheEventsDo: a request log filtered by key or
// model is read hour by hour from the rollups (rollupRequests); its
// pages, by key, by model or both, within a range or not, hold exactly
// the events asked for, newest first, as the events themselves list them,
// across pages of more hours than one batch reads.
func TestRequestsOfAKeyPageAsTheEventsDo(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t)
	ctx := context.Background()
	s, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	march, june := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		key, model string
		from, to   time.Time
		limit      int
	}{
		{yearQuietKey, "", time.Time{}, time.Time{}, 2},
		{yearBusyKey, "", march, june.Add(-90 * time.Minute), 1000},
		{yearBusyKey, "m1", march, june, 700},
		{yearBusyKey, "m2", time.Time{}, time.Time{}, 1000},
		{yearBusyKey, "no-such-model", time.Time{}, time.Time{}, 10},
		{"", "m1", march, june, 900},
		{"", "m0", time.Time{}, time.Time{}, 1000},
	} {
		from, to := tc.from, tc.to
		if from.IsZero() {
			from = time.Unix(0, 0)
		}
		if to.IsZero() {
			to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		rows, err := conn.Query(ctx, `SELECT id::text FROM usage_events WHERE customer_id = $1 AND ($2 = '' OR key_id::text = $2)
			AND ($3 = '' OR model = $3) AND occurred_at >= $4 AND occurred_at < $5 ORDER BY occurred_at DESC, id DESC`,
			yearCustomer, tc.key, tc.model, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		q := ledger.RequestQuery{CustomerID: yearCustomer, KeyID: tc.key, Model: tc.model, From: tc.from, To: tc.to, Limit: tc.limit}
		for pages := 0; ; pages++ {
			page, err := s.Requests(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Data {
				got = append(got, e.ID)
			}
			if page.NextCursor == "" || pages > 100 {
				break
			}
			q.Cursor = page.NextCursor
		}
		if !slices.Equal(got, want) {
			t.Errorf("key %s model %q [%s, %s) by %d: %d events paged, the key's are %d (first difference at %d)",
				tc.key, tc.model, tc.from, tc.to, tc.limit, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestUsageFromEventsProbesNoEntryPerEvent: usage grouped by end user (or
// deployment, provider; read from the events) looked up each event's
// rerate entries with an index probe of its own: a month of a customer
// with 4 million events took 2.4 s (the scale review). The month's rerate
// entries are now read once, by time, and joined.
func TestUsageFromEventsProbesNoEntryPerEvent(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t)
	march, april := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	for _, group := range []string{"end_user", "deployment"} {
		var page ledger.UsagePage
		n := indexScans(t, url, "ledger_entries", func(ctx context.Context, s *ledger.Store) {
			var err error
			if page, err = s.Usage(ctx, ledger.UsageQuery{CustomerID: yearCustomer, GroupBy: group, From: march, To: april}); err != nil {
				t.Fatal(err)
			}
		})
		if len(page.Data) == 0 || page.Data[0].Requests < yearPerMonth*9/10 {
			t.Fatalf("usage by %s of March: %+v", group, page.Data)
		}
		if limit := int64(100); n > limit {
			t.Errorf("usage by %s of a month of %d events probed ledger_entries %d times: once an event (limit %d)", group, yearPerMonth, n, limit)
		}
	}
}

// TestUsageWithinAnHourReadsTheEdgesAlone: one customer's usage from or
// to a time within an hour (the customer API's "the last 30 days",
// from=now-30d) reads the rollups of the whole hours and the events of
// the parts of an hour at the bounds. Those events' rerate entries were
// read for the whole range, every one the customer was given (a
// re-rating makes one an event), and aggregated to join a few events:
// 720 ms of 722 for a customer with 400,000 re-rated events, which read
// 2 ms by whole hours (a review), growing with its history to the
// customer API's 30 s cut-off. And once Postgres planned the query for
// any parameters (a generic plan, after five executions on a
// connection), it read every event and entry of the range, of every
// customer, by time.
func TestUsageWithinAnHourReadsTheEdgesAlone(t *testing.T) {
	t.Parallel() // Postgres builds the year's ledger: see the Makefile's test target
	url := newYearLedger(t) + "&pool_max_conns=1"
	from := time.Date(2025, 1, 1, 0, 0, 0, 500_000_000, time.UTC) // within the year's first hour
	to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, table := range []string{"ledger_entries", "usage_events"} {
		var page ledger.UsagePage
		n := rowsRead(t, url, table, func(ctx context.Context, s *ledger.Store) {
			for range 6 { // a generic plan (after five) must read the edges alone too
				var err error
				if page, err = s.Usage(ctx, ledger.UsageQuery{CustomerID: yearCustomer, From: from, To: to}); err != nil {
					t.Fatal(err)
				}
			}
		})
		var requests int64
		for _, r := range page.Data {
			requests += r.Requests
		}
		if requests < 12*yearPerMonth {
			t.Fatalf("usage of the year from %s: %d requests (%+v)", from.Format(time.RFC3339Nano), requests, page.Data)
		}
		if limit := int64(1000); n > limit {
			t.Errorf("6 usage queries of the year from a time within its first hour read %d rows of %s: the range's, not its first hour's (limit %d)",
				n, table, limit)
		}
	}
}
