package dashboards

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The billing dashboard's unpriced panels tell finance which usage is
// not billed yet: add a price, then re-rate. Re-rating never changes an
// event (its unpriced flag stays as first rated); a rerate entry prices
// it. A panel that read the flag alone went on listing every event the
// re-rating had priced: an audit saw all 90 of a ledger's unpriced events
// listed under "Latest unpriced events" after `tollgate rerate` priced
// all 90 (the statement, the usage API and reconciliation counted none).
func TestUnpricedPanelsForgetEventsPricedByRerating(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Second)
	s, conn, c, k := newLedger(ctx, t, "acme")
	var events []usage.Event
	for i := range 3 {
		events = append(events, usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(),
			Time: now.Add(-time.Duration(i) * time.Hour), CustomerID: c.ID, KeyID: k.ID, Provider: "p",
			Model: "new-model", Endpoint: "/v1/chat/completions", Status: usage.StatusOK, HTTPStatus: 200,
			UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1000, CompletionTokens: 10}})
	}
	if _, err := s.WriteEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"customer": "'" + c.ID + "'"}
	// rowsOf counts each unpriced panel's rows.
	rowsOf := func() map[string]int {
		out := map[string]int{}
		for _, d := range loadDashboards(t) {
			for _, q := range d.queries() {
				if q.uid != "postgres" || !strings.Contains(q.text, "unpriced") {
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
				out[q.where] = n
			}
		}
		if len(out) == 0 {
			t.Fatal("no unpriced panel found")
		}
		return out
	}
	for where, n := range rowsOf() {
		if n == 0 {
			t.Errorf("%s: no row before the model is priced", where)
		}
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "new-model", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: now.AddDate(0, -1, 0)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Rerate(ctx, now.Add(-24*time.Hour), now.Add(time.Hour), nil)
	if err != nil || res.Priced != 3 {
		t.Fatalf("Rerate: %+v, %v; want 3 priced", res, err)
	}
	for where, n := range rowsOf() {
		if n != 0 {
			t.Errorf("%s: %d row(s) after re-rating priced every event, want none", where, n)
		}
	}
}
