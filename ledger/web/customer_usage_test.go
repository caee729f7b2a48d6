package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleCustomerPageShowsOnlyItsUsage: a customer's console page
// shows that customer's usage of the month, by model, by day and in its
// chart, not that of another customer of the same model. A mutation
// audit: dropping the customer from any of the page's usage queries
// passed every test.
func TestConsoleCustomerPageShowsOnlyItsUsage(t *testing.T) {
	g := newRig(t)
	from := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := g.api.CreatePrice(context.Background(), ledger.PriceInput{Model: "shared", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: from}); err != nil {
		t.Fatal(err)
	}
	a, _, _ := g.customer("alpha", "shared", 1)
	g.customer("bravo", "shared", 3)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	status, body, _ := g.do(c, "GET", "/console/customers/"+a.ID, nil)
	if status != http.StatusOK {
		t.Fatalf("GET the customer page = %d", status)
	}
	for _, table := range []string{`id="usage-by-model"`, `id="usage-by-day"`} {
		rows := body[strings.Index(body, table):]
		rows = rows[:strings.Index(rows, "</table>")]
		if !strings.Contains(rows, `data-label="Requests">1<`) || !strings.Contains(rows, `data-label="Cost">0.0015 USD<`) {
			t.Errorf("%s lists other than alpha's 1 request of 0.0015 USD:\n%s", table, rows)
		}
	}
	if day := time.Now().UTC().Format("2006-01-02"); !strings.Contains(body, day+" shared: 0.0015 USD") {
		t.Errorf("the chart does not show alpha's 0.0015 USD of shared on %s", day)
	}
}
