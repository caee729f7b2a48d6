package web_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleCustomerPageUnread: a customer page whose customer the admin
// API could not read (an id of no customer, one that is not an id, or a
// balance the API failed to answer) says why and shows no figures and no
// form. It showed the page with empty figures: "created 0001-01-01
// 00:00", an "Add credit" form labelled "Credit amount ()", statement
// links for the wrong id, and, with the balance unread, "Available:
// unlimited" for a customer with a credit limit.
func TestConsoleCustomerPageUnread(t *testing.T) {
	var failBalance atomic.Bool
	g := newRigWrapped(t, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failBalance.Load() && strings.HasSuffix(r.URL.Path, "/balance") {
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
	check := func(path string, want int, says string) {
		t.Helper()
		status, body, _ := g.do(c, "GET", path, nil)
		if status != want || !strings.Contains(body, says) {
			t.Errorf("GET %s = %d, want %d saying %q: %s", path, status, want, says, body)
		}
		for _, bad := range []string{"0001-01-01", "Credit amount", "Add credit", "unlimited", "statements/", `id="balance"`} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s (%d) shows %q for a customer it could not read", path, status, bad)
			}
		}
	}
	check("/console/customers/"+uuid.NewString(), http.StatusNotFound, "not found")
	check("/console/customers/nope", http.StatusNotFound, "not a UUID")
	failBalance.Store(true)
	check("/console/customers/"+cu.ID, http.StatusBadGateway, "the database is unreachable")
}
