package dashboards

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The time range the macros expand to: the last 30 days, and a day ahead.
const (
	testFrom = `(now() - interval '30 days')`
	testTo   = `(now() + interval '1 day')`
)

var macroRE = regexp.MustCompile(`\$__(\w+)\(`)

// expandMacros does what Grafana's Postgres datasource does to a raw query
// before sending it, over a fixed time range: it expands the $__ macros and
// replaces template variables ($name, ${name}, [[name]]) with vars' values.
func expandMacros(sql string, vars map[string]string) (string, error) {
	return expandMacrosIn(sql, vars, testFrom, testTo)
}

// expandMacrosIn is expandMacros over the range from, to: SQL expressions of
// a timestamptz, as Grafana sends a dashboard's range (its $__timeFilter is
// BETWEEN the two, both included).
func expandMacrosIn(sql string, vars map[string]string, testFrom, testTo string) (string, error) {
	for {
		loc := macroRE.FindStringSubmatchIndex(sql)
		if loc == nil {
			break
		}
		name := sql[loc[2]:loc[3]]
		depth, end := 1, loc[1]
		for ; end < len(sql) && depth > 0; end++ {
			switch sql[end] {
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		if depth != 0 {
			return "", fmt.Errorf("$__%s: unbalanced parentheses", name)
		}
		args := splitArgs(sql[loc[1] : end-1])
		arg := func(i int) string {
			if i < len(args) {
				return args[i]
			}
			return "NULL"
		}
		epoch := func(s string) string { return "extract(epoch FROM " + s + ")" }
		var r string
		switch name {
		case "timeFilter":
			r = fmt.Sprintf("(%s BETWEEN %s AND %s)", arg(0), testFrom, testTo)
		case "timeFrom":
			r = testFrom
		case "timeTo":
			r = testTo
		case "unixEpochFilter":
			r = fmt.Sprintf("(%s BETWEEN %s AND %s)", arg(0), epoch(testFrom), epoch(testTo))
		case "timeGroup", "timeGroupAlias":
			r = fmt.Sprintf("to_timestamp(floor(%s / 3600) * 3600)", epoch(arg(0)))
			if name == "timeGroupAlias" {
				r += ` AS "time"`
			}
		default:
			return "", fmt.Errorf("macro $__%s is not supported here", name)
		}
		sql = sql[:loc[0]] + r + sql[end:]
	}
	names := slices.Sorted(maps.Keys(vars))
	slices.Reverse(names) // $customer before $cust
	for _, name := range names {
		val := vars[name]
		for _, ref := range []string{"${" + name + "}", "[[" + name + "]]", "$" + name} {
			sql = strings.ReplaceAll(sql, ref, val)
		}
	}
	if m := regexp.MustCompile(`\$\w+|\$\{[^}]*\}|\[\[\w+\]\]`).FindString(sql); m != "" {
		return "", fmt.Errorf("unknown variable or macro %s", m)
	}
	return sql, nil
}

// splitArgs splits a macro's arguments at the commas outside parentheses.
func splitArgs(s string) []string {
	var args []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				args, start = append(args, strings.TrimSpace(s[start:i])), i+1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" || len(args) > 0 {
		args = append(args, rest)
	}
	return args
}

func TestExpandMacros(t *testing.T) {
	got, err := expandMacros(`SELECT $__timeGroupAlias(hour, '1h'), x FROM t `+
		`WHERE $__timeFilter(date_trunc('day', hour)) AND c IN ($customer) AND d = ${cust} AND $__timeFrom() < now()`,
		map[string]string{"customer": "'a','b'", "cust": "'c'"})
	want := `SELECT to_timestamp(floor(extract(epoch FROM hour) / 3600) * 3600) AS "time", x FROM t ` +
		`WHERE (date_trunc('day', hour) BETWEEN ` + testFrom + ` AND ` + testTo + `) AND c IN ('a','b') AND d = 'c' AND ` + testFrom + ` < now()`
	if err != nil || got != want {
		t.Errorf("got  %s, %v\nwant %s", got, err, want)
	}
	for _, bad := range []string{`SELECT $__nope(x)`, `SELECT $other`, `SELECT $__timeFilter(x`} {
		if _, err := expandMacros(bad, nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestBillingQueries runs every SQL query of the dashboards, as Grafana's
// read-only role from deploy/postgres, against a ledger filled through the
// Store API by an ordinary role that owns the database, as compose's
// Tollgate role does, and wants at least one row from each.
func TestBillingQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, appRole := ledgertest.NewOwnedDatabase(t)
	// deploy/postgres's scripts run as the superuser.
	conn, err := pgx.Connect(ctx, ledgertest.SuperuserURL(t, url))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// The reader role, under a name of its own: roles are cluster-wide.
	script, err := os.ReadFile("../deploy/postgres/10-grafana-reader.sql")
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	reader := "grafana_reader_" + hex.EncodeToString(b[:])
	sql := strings.ReplaceAll(string(script), "grafana_reader", reader)
	sql = strings.ReplaceAll(sql, "FOR ROLE tollgate ", "FOR ROLE "+appRole+" ")
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("deploy/postgres/10-grafana-reader.sql: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, ledgertest.SuperuserURL(t, url))
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP OWNED BY "+reader+"; DROP ROLE "+reader); err != nil {
			t.Errorf("drop role %s: %v", reader, err)
		}
	})

	store, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	customers := fillLedger(ctx, t, store)
	if _, err := queryAs(ctx, conn, reader, `INSERT INTO customers (name) VALUES ('x') RETURNING id`); err == nil {
		t.Errorf("the Grafana role %s may write to the ledger", reader)
	}

	var ids []string
	for _, id := range customers {
		ids = append(ids, "'"+id+"'")
	}
	// A multi-value variable set to All, as Grafana sends it.
	vars := map[string]string{"customer": strings.Join(ids, ",")}
	n := 0
	for _, d := range loadDashboards(t) {
		for _, q := range d.queries() {
			if q.uid != "postgres" {
				continue
			}
			n++
			sql, err := expandMacros(q.text, vars)
			if err != nil {
				t.Errorf("%s: %v", q.where, err)
				continue
			}
			rows, err := queryAs(ctx, conn, reader, sql)
			switch {
			case err != nil:
				t.Errorf("%s: %v\n%s", q.where, err, sql)
			case rows == 0:
				t.Errorf("%s: no rows\n%s", q.where, sql)
			default:
				t.Logf("%s: %d rows", q.where, rows)
			}
		}
	}
	if n == 0 {
		t.Error("no SQL queries found")
	}
}

// queryAs runs sql as role in a transaction it rolls back, and counts the rows.
func queryAs(ctx context.Context, conn *pgx.Conn, role, sql string) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, sql)
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// fillLedger adds customers with keys, credit and budgets, two priced
// models and an unpriced one, and a few days of usage up to now. It returns
// the customers' ids by name.
func fillLedger(ctx context.Context, t *testing.T, s *ledger.Store) map[string]string {
	t.Helper()
	now := time.Now().UTC()
	for _, model := range []string{"gpt-test", "claude-test"} {
		if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: model, Currency: "USD", Input: "2.50",
			CachedInput: "1.25", Output: "10", EffectiveFrom: now.AddDate(0, -3, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	limit := func(s string) *string { return &s }
	custs := []struct {
		name   string
		limit  *string
		credit string
	}{{"acme", limit("100"), "50"}, {"globex", limit("2"), "1"}, {"initech", nil, ""}}
	ids := map[string]string{}
	var events []usage.Event
	for ci, c := range custs {
		cust, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: c.name, CreditLimit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		ids[c.name] = cust.ID
		key, _, err := s.CreateKey(ctx, cust.ID, ledger.KeyInput{Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if c.credit != "" {
			if _, err := s.AddEntry(ctx, cust.ID, ledger.KindCredit, ledger.EntryInput{Amount: c.credit, Memo: "top-up",
				EffectiveAt: now.AddDate(0, 0, -7)}); err != nil {
				t.Fatal(err)
			}
		}
		// Every 5 hours over 5 days, the first one just now: this month
		// has usage whatever the day.
		for i := range 24 {
			events = append(events, usage.Event{
				Version: usage.SchemaVersion, ID: uuid.NewString(), Time: now.Add(-time.Duration(i) * 5 * time.Hour),
				CustomerID: cust.ID, KeyID: key.ID, Provider: "openai",
				Model:    []string{"gpt-test", "claude-test", "mystery-model"}[(i+ci)%3],
				Endpoint: "/v1/chat/completions", Stream: i%2 == 0, Status: usage.StatusOK, HTTPStatus: 200,
				FinishReason: "stop", UsageSource: usage.SourceUpstream, TTFTMillis: 300, DurationMillis: 2000,
				Usage: usage.Tokens{PromptTokens: int64(1000 + 100*i), CachedTokens: 400,
					CompletionTokens: int64(300 + 10*i), ReasoningTokens: 120},
			})
		}
	}
	if n, err := s.WriteEvents(ctx, events); err != nil || n != len(events) {
		t.Fatalf("WriteEvents: %d of %d, %v", n, len(events), err)
	}
	return ids
}

// newLedger is a fresh ledger for a dashboard's queries: its store, a
// connection to its database (closed at the test's end), and a customer
// named name with a key.
func newLedger(ctx context.Context, t *testing.T, name string) (*ledger.Store, *pgx.Conn, ledger.Customer, ledger.Key) {
	t.Helper()
	s, url := ledgertest.NewStoreURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	c, k := newCustomerWithKey(ctx, t, s, name)
	return s, conn, c, k
}

// newCustomerWithKey makes a customer named name with a key in s.
func newCustomerWithKey(ctx context.Context, t *testing.T, s *ledger.Store, name string) (ledger.Customer, ledger.Key) {
	t.Helper()
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}
