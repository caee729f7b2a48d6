package api_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestEntriesRangeIsFromInclusiveToExclusive: a customer's entry list
// (GET /admin/v1/customers/{id}/entries?from=&to=) holds the entries of
// [from, to): one effective at from is listed, one at to is not.
// (Mutation audit survivor: to made inclusive.)
func TestEntriesRangeIsFromInclusiveToExclusive(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"a"}`)
	for i, at := range []string{"2026-01-01T00:00:00Z", "2026-01-15T00:00:00Z", "2026-02-01T00:00:00Z"} {
		s.adm("POST", "/admin/v1/customers/"+cust+"/credits", fmt.Sprintf(`{"amount":"%d","effective_at":%q}`, i+1, at), http.StatusCreated, nil)
	}
	var page entryPage
	s.adm("GET", "/admin/v1/customers/"+cust+"/entries?from=2026-01-01&to=2026-02-01", "", http.StatusOK, &page)
	if len(page.Data) != 2 || page.Data[0].Amount != "1" || page.Data[1].Amount != "2" {
		t.Errorf("entries of [2026-01-01, 2026-02-01) = %+v, want the credits of 1 (at from) and 2, not 3 (at to)", page.Data)
	}
}
