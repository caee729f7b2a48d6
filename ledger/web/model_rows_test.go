package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestModelTablesAreBounded: the console's customer page and the portal's
// usage page listed every model of the month's usage in their by-model
// table. The client chooses the model name (a provider with prefix_routes:
// all serves any "provider/<name>", and a refused one is still a request
// of that name), so a customer could grow both pages without bound: 20,000
// names made each 7.7 MB (a day at 10 requests a second, 330 MB). Each now
// lists the costliest 100 and says how many models there are; the figures
// above them (spend, requests) still count every one.
func TestModelTablesAreBounded(t *testing.T) {
	g := newRig(t)
	cu, secret := clientChosenModels(t, g, 150, func(int) int { return 1 })
	console, portal := g.browser(), g.browser()
	g.signIn(console, "console", "token", adminToken)
	g.signIn(portal, "portal", "key", secret)
	for _, page := range []struct {
		name string
		do   func() (int, string)
	}{
		{"console customer page", func() (int, string) { s, b, _ := g.do(console, "GET", "/console/customers/"+cu.ID, nil); return s, b }},
		{"portal usage page", func() (int, string) { s, b, _ := g.do(portal, "GET", "/portal/", nil); return s, b }},
	} {
		status, body := page.do()
		if status != 200 {
			t.Fatalf("%s: %d\n%s", page.name, status, body)
		}
		_, table, _ := strings.Cut(body, `id="usage-by-model"`)
		table, _, _ = strings.Cut(table, "</table>")
		if rows := strings.Count(table, "client-chosen-"); rows > 100 {
			t.Errorf("%s: %d rows of models in the by-model table, want at most 100", page.name, rows)
		}
		if !strings.Contains(body, "150 models") {
			t.Errorf("%s: does not say that there are 150 models", page.name)
		}
		if !strings.Contains(body, `id="requests-month">150<`) && page.name == "portal usage page" {
			t.Errorf("%s: the month's requests do not count every model's", page.name)
		}
	}
}

// TestUnpricedModelListsAreBounded: the portal's statements page (its
// "Not priced yet" table) and the console's reconciliation (its unpriced
// models) listed every model of their unpriced usage, one row each: the
// names a client chooses (TestModelTablesAreBounded) are unpriced, so a
// customer could grow both pages without bound, the reconciliation
// (which every operator's visit computes) with every customer's. Each now
// lists the 100 with the most requests and says how many there are.
func TestUnpricedModelListsAreBounded(t *testing.T) {
	g := newRig(t)
	_, secret := clientChosenModels(t, g, 150, func(i int) int { return 1 + i%3 }) // the 50 of 3 requests each are listed first
	console, portal := g.browser(), g.browser()
	g.signIn(console, "console", "token", adminToken)
	g.signIn(portal, "portal", "key", secret)
	for _, page := range []struct {
		name, table string
		do          func() (int, string)
	}{
		{"portal statements page", `id="unpriced"`, func() (int, string) { s, b, _ := g.do(portal, "GET", "/portal/statements", nil); return s, b }},
		{"console reconciliation", `aria-label="Unpriced models"`, func() (int, string) {
			s, b, _ := g.do(console, "GET", "/console/reconciliation", nil)
			return s, b
		}},
	} {
		status, body := page.do()
		if status != 200 {
			t.Fatalf("%s: %d\n%s", page.name, status, body)
		}
		_, table, ok := strings.Cut(body, page.table)
		if !ok {
			t.Fatalf("%s: no table of unpriced models:\n%s", page.name, body)
		}
		table, _, _ = strings.Cut(table, "</table>")
		if rows := strings.Count(table, "client-chosen-"); rows > 100 {
			t.Errorf("%s: %d rows of models in the table of unpriced models, want at most 100", page.name, rows)
		}
		if !strings.Contains(table, "client-chosen-002") || !strings.Contains(table, "client-chosen-149") {
			t.Errorf("%s: the models of the most requests are not listed", page.name)
		}
		if !strings.Contains(body, "150 models") {
			t.Errorf("%s: does not say that there are 150 models", page.name)
		}
	}
}

// clientChosenModels writes, for a new customer acme, requests to n models
// named sim/client-chosen-000 and on as a client may choose them (refused:
// 404), requests(i) of the i-th; it returns the customer and its key.
func clientChosenModels(t *testing.T, g *rig, n int, requests func(i int) int) (ledger.Customer, string) {
	t.Helper()
	cu, secret, _ := g.customer("acme", "sim/priced", 0)
	st, _, _, err := g.store.KeyState(context.Background(), usage.KeyHash(secret))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var evs []usage.Event
	for i := range n {
		for range requests(i) {
			evs = append(evs, usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: now.Add(-time.Duration(len(evs)) * time.Millisecond),
				CustomerID: cu.ID, KeyID: st.KeyID, Provider: "sim", Model: fmt.Sprintf("sim/client-chosen-%03d", i), Endpoint: "/v1/chat/completions",
				Status: usage.StatusUpstreamError, HTTPStatus: 404, UsageSource: usage.SourceUpstream})
		}
	}
	if _, err := g.store.WriteEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return cu, secret
}
