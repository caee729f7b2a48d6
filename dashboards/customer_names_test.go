package dashboards

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Customer names are not unique (two "Acme" companies, a renamed one, a
// name reused): the billing dashboard's per-customer revenue must be per
// customer. Its panels grouped by the name, so two customers of one name
// showed as one row (or one series) with their revenue summed: a top-20
// ranking and a revenue-by-customer table finance reads that attribute
// two accounts' money to one.
func TestBillingRevenueIsPerCustomerNotPerName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, url := ledgertest.NewStoreURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	now := time.Now().UTC()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: now.AddDate(0, -3, 0)}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var events []usage.Event
	for i := range 2 {
		c, k := newCustomerWithKey(ctx, t, s, "Acme")
		ids = append(ids, "'"+c.ID+"'")
		events = append(events, usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: now,
			CustomerID: c.ID, KeyID: k.ID, Provider: "p", Model: "m", Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: int64(1000 * (i + 1)), CompletionTokens: 10}})
	}
	if _, err := s.WriteEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"customer": strings.Join(ids, ",")}
	checked := 0
	for _, d := range loadDashboards(t) {
		for _, q := range d.queries() {
			if q.uid != "postgres" || !strings.Contains(q.text, "JOIN customers") || !strings.Contains(q.text, "usage_hourly") {
				continue
			}
			sql, err := expandMacros(q.text, vars)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, sql)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			checked++
			// One model, one currency, one day (or one series per
			// customer): a row per customer.
			if n != 2 {
				t.Errorf("%s: %d row(s) for two customers named Acme, want 2 (one per customer, not one per name)", q.where, n)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no per-customer revenue query found")
	}
}
