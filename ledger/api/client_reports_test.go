package api_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientReports: usage (a page, every page, by customer with names),
// statements (typed and streamed), the export, reconcile and rerate.
func TestClientReports(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), context.Background()
	a, keyA, _ := s.customer(`{"name":"alpha"}`)
	b, keyB, _ := s.customer(`{"name":"beta"}`)
	_, err := c.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	noErr(t, "CreatePrice", err)
	at := time.Date(2026, 3, 10, 10, 15, 0, 0, time.UTC)
	u := usage.Tokens{PromptTokens: 1000}
	s.write(event(a, keyA, "m", at, u), event(b, keyB, "m", at, u), event(a, keyA, "free", at, u))
	march, april := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)

	page, err := c.Usage(ctx, ledger.UsageQuery{GroupBy: "customer", Limit: 1})
	noErr(t, "Usage", err)
	rows, err := c.UsageAll(ctx, ledger.UsageQuery{GroupBy: "customer", Limit: 1})
	noErr(t, "UsageAll", err)
	names := map[string]string{}
	for _, r := range rows {
		names[r.CustomerID] = r.CustomerName
	}
	if len(page.Data) != 1 || page.NextCursor == "" || len(rows) != 2 || names[a] != "alpha" || names[b] != "beta" {
		t.Fatalf("Usage = %+v, UsageAll = %+v", page, rows)
	}
	day, err := c.Usage(ctx, ledger.UsageQuery{CustomerID: a, GroupBy: "day", From: at.Truncate(24 * time.Hour), To: at.Truncate(24*time.Hour).AddDate(0, 0, 1)})
	noErr(t, "Usage by day", err)
	if len(day.Data) != 1 || day.Data[0].Requests != 2 || day.Data[0].UnpricedRequests != 1 || day.Data[0].CustomerName != "" ||
		dec(t, day.Data[0].Cost).String() != "0.001" {
		t.Fatalf("Usage by day = %+v", day)
	}
	_, err = c.Usage(ctx, ledger.UsageQuery{GroupBy: "week"})
	wantCode(t, "Usage(week)", err, ledger.EInvalid, "group_by")

	st, err := c.Statement(ctx, a, "2026-03")
	noErr(t, "Statement", err)
	if st.Period != "2026-03" || st.CustomerName != "alpha" || len(st.Sections) != 1 || len(st.Unpriced) != 1 {
		t.Fatalf("Statement = %+v", st)
	}
	var stCSV, stJSON bytes.Buffer
	n, err := c.WriteStatement(ctx, a, "2026-03", "csv", &stCSV)
	noErr(t, "WriteStatement csv", err)
	_, err = c.WriteStatement(ctx, a, "2026-03", "json", &stJSON)
	noErr(t, "WriteStatement json", err)
	if n != int64(stCSV.Len()) || !strings.Contains(stCSV.String(), "usage") || !strings.Contains(stJSON.String(), `"customer_name":"alpha"`) {
		t.Fatalf("WriteStatement: %d bytes of CSV %q, JSON %q", n, stCSV.String(), stJSON.String())
	}
	_, err = c.WriteStatement(ctx, a, "2026-03", "xml", &stCSV)
	wantCode(t, "WriteStatement(xml)", err, ledger.EInvalid, "format")
	_, err = c.Statement(ctx, uuid.NewString(), "2026-03")
	wantCode(t, "Statement(unknown)", err, ledger.ENotFound, "not found")

	var export bytes.Buffer
	n, err = c.Export(ctx, march, april, &export)
	noErr(t, "Export", err)
	records, err := csv.NewReader(bytes.NewReader(export.Bytes())).ReadAll()
	if err != nil || n != int64(export.Len()) || len(records) != 4 || records[0][0] != "record" {
		t.Fatalf("Export: %d bytes, records %q, %v", n, records, err)
	}
	_, err = c.Export(ctx, time.Time{}, april, &export)
	wantCode(t, "Export without from", err, ledger.EInvalid, "from")

	rec, err := c.Reconcile(ctx, march, april)
	noErr(t, "Reconcile", err)
	if !rec.Clean || rec.Events != 3 || rec.UnpricedEvents != 1 {
		t.Fatalf("Reconcile = %+v", rec)
	}
	_, err = c.Reconcile(ctx, april, march)
	wantCode(t, "Reconcile(to before from)", err, ledger.EInvalid, "before")
	_, err = c.CreatePrice(ctx, ledger.PriceInput{Model: "free", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: march})
	noErr(t, "CreatePrice", err)
	rr, err := c.Rerate(ctx, march, april, nil)
	noErr(t, "Rerate", err)
	if rr.Examined != 3 || rr.Priced != 1 || rr.Adjusted != 1 {
		t.Fatalf("Rerate = %+v", rr)
	}
	_, err = c.Rerate(ctx, april, march, nil)
	wantCode(t, "Rerate(to before from)", err, ledger.EInvalid, "before")
}
