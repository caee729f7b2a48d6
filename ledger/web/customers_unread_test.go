package web_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleCustomersPageBalanceUnread: when the admin API fails to
// answer a customer's balance, the customers page says so and shows no
// row with figures it did not read. The row of that customer showed an
// empty balance, "none" for its credit limit and "unlimited" available,
// for a customer with a credit limit of 50.
func TestConsoleCustomersPageBalanceUnread(t *testing.T) {
	var failFor atomic.Value
	failFor.Store("")
	g := newRigWrapped(t, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id := failFor.Load().(string); id != "" && r.URL.Path == "/admin/v1/customers/"+id+"/balance" {
				http.Error(w, `{"error":{"code":"internal","message":"the database is unreachable","type":"internal"}}`, http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	limit := "50"
	cu, err := g.api.CreateCustomer(context.Background(), ledger.CustomerInput{Name: "limited", CreditLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	failFor.Store(cu.ID)
	status, body, _ := g.do(c, "GET", "/console/customers", nil)
	if !strings.Contains(body, "the database is unreachable") {
		t.Errorf("GET /console/customers = %d does not say the balance could not be read", status)
	}
	table := body[strings.Index(body, `<table id="customers">`):]
	table = table[:strings.Index(table, "</table>")]
	if strings.Contains(table, "unlimited") || strings.Contains(table, ">none<") {
		t.Errorf("the customers table shows figures it did not read:\n%s", table)
	}
}
