package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsoleBadQueryAnswers4xx: a console list page asked for what its
// query cannot name (a cursor the API did not make, a customer id that is
// not one or names no customer, a reconciliation range that is no range)
// says so on the page, and with a 4xx status as the customer page and the
// portal do: these pages answered 200 OK with the error on them, so that a
// link checker or a monitor took a mistyped link for a page.
func TestConsoleBadQueryAnswers4xx(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("bad-query-co", "m1", 1)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/console/customers?cursor=bogus", http.StatusBadRequest, "is not a cursor"},
		{"/console/keys?cursor=bogus", http.StatusBadRequest, "is not a cursor"},
		{"/console/keys?customer=" + cu.ID + "&cursor=bogus", http.StatusBadRequest, "is not a cursor"},
		{"/console/keys?customer=nope", http.StatusBadRequest, "not a UUID"},
		{"/console/keys?customer=00000000-0000-0000-0000-000000000000", http.StatusNotFound, "not found"},
		{"/console/reconciliation?from=x&to=y", http.StatusBadRequest, "is not a time"},
		{"/console/reconciliation?from=2026-02-01T00:00&to=2026-01-01T00:00", http.StatusBadRequest, "before"},
	} {
		status, body, _ := g.do(c, "GET", tc.path, nil)
		if status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("GET %s = %d, saying %q: %t; want %d", tc.path, status, tc.says, strings.Contains(body, tc.says), tc.status)
		}
	}
	// What the pages are for still answers 200.
	for _, p := range []string{"/console/customers", "/console/keys", "/console/keys?customer=" + cu.ID,
		"/console/reconciliation?from=2026-01-01T00:00&to=2026-01-02T00:00"} {
		if status, body, _ := g.do(c, "GET", p, nil); status != http.StatusOK {
			t.Errorf("GET %s = %d %.300s; want 200", p, status, body)
		}
	}
}
