package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// BenchmarkWebPages times every console and portal page over a ledger of
// TOLLGATE_BENCH_EVENTS usage events (default 100,000; BENCHMARKS.md
// reports 10,000,000) of 1,000 customers and 20 priced models over the last
// 30 days, loaded with SQL (generate_series) straight into the ledger's
// tables: events, event ids, hourly rollups and balances, as the meter
// would have written them (reconciliation of the range comes out clean).
// The stack's customer "acme" is one of the 1,000, and the portal signs in
// with its key. Each page is fetched 50 times with a signed-in session
// over HTTP (the whole stack, listeners included); metrics are
// <page>_p50_ms and _p99_ms, and ns/op is one overview (its cached figures;
// overview_fresh and reconciliation_fresh are the recomputations that the
// console otherwise runs in the background).
func BenchmarkWebPages(b *testing.B) {
	n := 100_000
	if v := os.Getenv("TOLLGATE_BENCH_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("TOLLGATE_BENCH_EVENTS=%q is not a positive number", v)
		}
	}
	s := newStack(b, nil)
	ctx := context.Background()
	cl := api.NewClient(s.admin, testAdminToken, nil)
	for m := range 20 {
		if _, err := cl.CreatePrice(ctx, ledger.PriceInput{Model: fmt.Sprintf("bench-%02d", m), Currency: "USD",
			Input: ledger.FormatMicros(int64(150_000 + 700_000*m)), CachedInput: ledger.FormatMicros(int64(75_000 + 70_000*m)),
			Output: ledger.FormatMicros(int64(600_000 + 2_900_000*m)), EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	loadEvents(b, s.env.DatabaseURL, s.customerID, n)
	fmt.Fprintf(os.Stderr, "web bench: %d events loaded, analyzed and checkpointed in %s\n", n, time.Since(t0).Round(time.Second))

	console, portal := sessionClient(b, s.admin+"/console/signin", "token", testAdminToken), sessionClient(b, s.gateway+"/portal/signin", "key", s.secret)
	period := time.Now().UTC().Format("2006-01")
	type target struct {
		name string
		c    *http.Client
		url  string
		n    int
	}
	targets := []target{
		{"overview_fresh", console, s.admin + "/console/?fresh=1", 5},
		{"overview", console, s.admin + "/console/", 50},
		{"customers", console, s.admin + "/console/customers", 50},
		{"customers_search", console, s.admin + "/console/customers?q=customer-09", 50},
		{"customer", console, s.admin + "/console/customers/" + s.customerID, 50},
		{"console_statement_csv", console, s.admin + "/console/customers/" + s.customerID + "/statements/" + period + ".csv", 50},
		{"keys", console, s.admin + "/console/keys?customer=" + s.customerID, 50},
		{"prices", console, s.admin + "/console/prices", 50},
		{"reconciliation_fresh", console, s.admin + "/console/reconciliation?fresh=1", 3},
		{"reconciliation", console, s.admin + "/console/reconciliation", 50},
		{"reconciliation_2h", console, s.admin + "/console/reconciliation?from=" + time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04") +
			"&to=" + time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04"), 10},
		{"dlq", console, s.admin + "/console/dlq", 50},
		{"portal_usage", portal, s.gateway + "/portal/", 50},
		{"portal_requests", portal, s.gateway + "/portal/requests", 50},
		{"portal_statements", portal, s.gateway + "/portal/statements", 50},
		{"portal_statement_csv", portal, s.gateway + "/portal/statements/" + period + ".csv", 50},
	}
	type metric struct {
		v    float64
		unit string
	}
	var metrics []metric
	for _, tg := range targets {
		var ds []time.Duration
		for range tg.n {
			t0 := time.Now()
			fetch(b, tg.c, tg.url)
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		p50, p99 := ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
		fmt.Fprintf(os.Stderr, "web bench: %-22s n=%3d p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", tg.name, tg.n, ms(p50), ms(p99), ms(ds[len(ds)-1]))
		metrics = append(metrics, metric{ms(p50), tg.name + "_p50_ms"}, metric{ms(p99), tg.name + "_p99_ms"})
	}
	for b.Loop() {
		fetch(b, console, s.admin+"/console/")
	}
	for _, m := range metrics {
		b.ReportMetric(m.v, m.unit)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sessionClient signs in at signin with field=secret and returns a client
// holding the session cookie.
func sessionClient(b *testing.B, signin, field, secret string) *http.Client {
	b.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(signin, url.Values{field: {secret}})
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(resp.Request.URL.Path, "signin") {
		b.Fatalf("sign in at %s = %d at %s: %s", signin, resp.StatusCode, resp.Request.URL, body)
	}
	return c
}

// fetch GETs url, wanting a 200 that is not the sign-in page or an error.
func fetch(b *testing.B, c *http.Client, u string) {
	b.Helper()
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(resp.Request.URL.Path, "signin") || strings.Contains(string(body), `class="error"`) {
		b.Fatalf("GET %s = %d at %s: %.500s", u, resp.StatusCode, resp.Request.URL, body)
	}
}

// loadEvents writes n events over the last 30 days for 1,000 customers
// (acme and 999 made here, each with one key), 80% of a customer's events
// on one of its three usual models of the 20 bench-NN models, priced as
// the price book says; then the event ids, the hourly rollups and the
// balances that the meter keeps with them; then ANALYZE and CHECKPOINT.
func loadEvents(b *testing.B, dbURL, acme string, n int) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	end := time.Now().UTC()
	start := end.Add(-30 * 24 * time.Hour)
	steps := []string{
		`SET TimeZone = 'UTC'`,
		`SELECT setseed(0.42)`,
		`INSERT INTO customers (name) SELECT 'customer-' || lpad(i::text, 4, '0') FROM generate_series(1, 999) i`,
		`INSERT INTO api_keys (customer_id, name, prefix, secret_hash)
		 SELECT id, 'default', 'tg-bench', sha256(convert_to(id::text, 'UTF8')) FROM customers WHERE name LIKE 'customer-%'`,
		`CREATE TEMP TABLE bench_accounts AS
		 SELECT (row_number() OVER (ORDER BY c.name) - 1)::int AS n, c.id AS customer_id, k.id AS key_id
		 FROM customers c JOIN api_keys k ON k.customer_id = c.id
		 WHERE c.name LIKE 'customer-%' OR c.id = '` + acme + `'`,
		`CREATE TEMP TABLE bench_models AS
		 SELECT (row_number() OVER (ORDER BY model) - 1)::int AS n, model, id AS price_id, input_micros, cached_input_micros, output_micros
		 FROM prices WHERE model LIKE 'bench-%'`,
	}
	for m := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, time.UTC); m.Before(end); m = m.AddDate(0, 1, 0) {
		steps = append(steps, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS usage_events_%s PARTITION OF usage_events FOR VALUES FROM ('%s') TO ('%s')`,
			m.Format("2006_01"), m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339)))
	}
	steps = append(steps,
		fmt.Sprintf(`INSERT INTO usage_events (id, occurred_at, customer_id, key_id, provider, model, served_model, endpoint, stream,
		   status, http_status, finish_reason, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens,
		   web_search_requests, usage_source, ttft_ms, duration_ms, error, price_id, currency, cost_e12)
		 SELECT gen_random_uuid(), g.at, a.customer_id, a.key_id, 'sim', m.model, m.model, '/v1/chat/completions', true,
		   'ok', 200, 'stop', g.prompt, g.cached, 0, g.completion, g.completion / 4, 0, 'upstream', 200, 1500, '', m.price_id, 'USD',
		   (g.prompt - g.cached) * m.input_micros + g.cached * m.cached_input_micros + g.completion * m.output_micros
		 FROM (SELECT '%s'::timestamptz + (i::float8 / %d) * interval '30 days' AS at,
		         floor(random() * 1000)::int AS cust, random() AS pick, floor(random() * 3)::int AS usual, floor(random() * 20)::int AS any,
		         50 + floor(random() * 8000)::bigint AS prompt, floor(random() * 2000)::bigint AS completion, random() AS cr
		       FROM generate_series(0, %d) i) g0
		 CROSS JOIN LATERAL (SELECT g0.at, g0.cust, g0.prompt, g0.completion, floor(g0.cr * g0.prompt / 2)::bigint AS cached,
		   CASE WHEN g0.pick < 0.8 THEN (g0.cust * 7 + g0.usual * 5) %% 20 ELSE g0.any END AS model) g
		 JOIN bench_accounts a ON a.n = g.cust
		 JOIN bench_models m ON m.n = g.model`, start.Format(time.RFC3339Nano), n, n-1),
		`INSERT INTO event_ids (id, occurred_at) SELECT id, occurred_at FROM usage_events WHERE model LIKE 'bench-%'`,
		`INSERT INTO usage_hourly
		 SELECT customer_id, date_trunc('hour', occurred_at), key_id, model, currency, count(*), 0, sum(prompt_tokens),
		   sum(cached_tokens), sum(cache_write_tokens), sum(completion_tokens), sum(reasoning_tokens), sum(web_search_requests),
		   sum(cost_e12), sum(cost_e12)
		 FROM usage_events WHERE model LIKE 'bench-%' GROUP BY 1, 2, 3, 4, 5`,
		`INSERT INTO customer_balances (customer_id, currency, charges_e12)
		 SELECT customer_id, currency, sum(charge_e12) FROM usage_hourly WHERE model LIKE 'bench-%' GROUP BY 1, 2
		 ON CONFLICT (customer_id, currency) DO UPDATE SET charges_e12 = customer_balances.charges_e12 + EXCLUDED.charges_e12`,
		`ANALYZE`,
		`CHECKPOINT`,
	)
	for _, q := range steps {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
		if d := time.Since(t0); d > time.Second {
			fmt.Fprintf(os.Stderr, "web bench: %s… took %s\n", firstWords(q), d.Round(time.Second))
		}
	}
}

// firstWords is the start of a statement, for the progress lines.
func firstWords(q string) string {
	s := strings.Join(strings.Fields(q), " ")
	return s[:min(len(s), 60)]
}
