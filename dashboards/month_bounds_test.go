package dashboards

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A range that ends where the next month begins (Grafana's absolute range
// 2026-01-01 00:00:00 to 2026-02-01 00:00:00, as finance sets it to check a
// statement) is January's money, as the statement and every report counts
// [from, to). The billing dashboard's hourly panels filtered with
// $__timeFilter, BETWEEN both bounds, so February's first hour was counted
// in January's revenue.
func TestBillingRevenueOfAMonthIsItsStatements(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, conn, c, k := newLedger(ctx, t, "Acme")
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	feb := jan.AddDate(0, 1, 0)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: jan.AddDate(0, -1, 0)}); err != nil {
		t.Fatal(err)
	}
	// January's last hour: 1,000,000 prompt tokens at 1 USD per 1M, 1 USD.
	// February's first instant: 2 USD, not January's.
	var events []usage.Event
	for i, at := range []time.Time{feb.Add(-time.Minute), feb} {
		events = append(events, usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: at,
			CustomerID: c.ID, KeyID: k.ID, Provider: "p", Model: "m", Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: int64(1_000_000 * (i + 1))}})
	}
	if _, err := s.WriteEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	from, to := `'2026-01-01T00:00:00Z'::timestamptz`, `'2026-02-01T00:00:00Z'::timestamptz`
	vars := map[string]string{"customer": "'" + c.ID + "'"}
	checked := 0
	for _, d := range loadDashboards(t) {
		for _, q := range d.queries() {
			if q.uid != "postgres" || !strings.Contains(q.text, "usage_hourly") || !strings.Contains(q.text, "charge_e12") ||
				!strings.Contains(q.text, "$__time") { // the panels over the dashboard's range
				continue
			}
			sql, err := expandMacrosIn(q.text, vars, from, to)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, sql)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			// The revenue column: the one the query names revenue, charge
			// or value.
			total := new(big.Rat)
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				for i, f := range rows.FieldDescriptions() {
					switch f.Name {
					case "revenue", "charge", "value":
						total.Add(total, ratOf(t, vals[i]))
					}
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			checked++
			if total.Cmp(big.NewRat(1, 1)) != 0 {
				t.Errorf("%s: January's revenue %s USD, want 1 (the statement's): February's first hour is not January's",
					q.where, total.FloatString(6))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no revenue query over usage_hourly found")
	}
}

// ratOf is a revenue cell's exact value: numeric, as sum(charge_e12) / 1e12
// is, or a float.
func ratOf(t *testing.T, v any) *big.Rat {
	t.Helper()
	switch v := v.(type) {
	case pgtype.Numeric:
		r := new(big.Rat).SetInt(v.Int)
		e := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(v.Exp, -v.Exp))), nil))
		if v.Exp < 0 {
			return r.Quo(r, e)
		}
		return r.Mul(r, e)
	case float64:
		return new(big.Rat).SetFloat64(v)
	}
	t.Fatalf("revenue cell of type %T", v)
	return nil
}
