package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestUnknownCurrencyRefused: a currency golang.org/x/text/currency does not
// know as ISO 4217 (ZZZ) is refused with 400 naming the field, wherever a
// currency is taken; known codes, in either case, are accepted.
func TestUnknownCurrencyRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"acme"}`)
	from := `"effective_from":"2026-01-01T00:00:00Z"`
	for _, tc := range []struct{ path, body, field string }{
		{"/admin/v1/customers", `{"name":"zed","currency":"ZZZ"}`, "currency"},
		{"/admin/v1/customers", `{"name":"zed","currency":"zzz"}`, "currency"},
		{"/admin/v1/customers", `{"name":"zed","currency":"EURO"}`, "currency"},
		{"/admin/v1/prices", `{"model":"m","currency":"ZZZ","input":"1","output":"1",` + from + `}`, "currency"},
		{"/admin/v1/prices", `{"model":"m","currency":"AAA","input":"1","output":"1",` + from + `}`, "currency"},
		{"/admin/v1/customers/" + cust + "/overrides", `{"model":"m","price":{"currency":"ZZZ","input":"1","output":"1"},` + from + `}`, "price.currency"},
		// Credits and adjustments are in the customer's currency: one given is refused.
		{"/admin/v1/customers/" + cust + "/credits", `{"amount":"1","currency":"ZZZ"}`, "currency"},
		{"/admin/v1/customers/" + cust + "/adjustments", `{"amount":"1","currency":"ZZZ"}`, "currency"},
	} {
		status, body, err := send("POST", s.admin+tc.path, adminToken, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, "POST "+tc.path+" "+tc.body, status, body, tc.field)
	}

	// Nothing was made by the refused requests.
	var cs struct{ Data []ledger.Customer }
	s.adm("GET", "/admin/v1/customers?name=zed", "", http.StatusOK, &cs)
	var ps struct{ Data []any }
	s.adm("GET", "/admin/v1/prices", "", http.StatusOK, &ps)
	var os struct{ Data []any }
	s.adm("GET", "/admin/v1/customers/"+cust+"/overrides", "", http.StatusOK, &os)
	if len(cs.Data)+len(ps.Data)+len(os.Data) != 0 {
		t.Errorf("refused requests made %d customers, %d prices, %d overrides", len(cs.Data), len(ps.Data), len(os.Data))
	}

	// Known codes pass, upper-cased: minor units of 0, 2 and 3 decimals.
	for _, code := range []string{"JPY", "eur", "KWD"} {
		var c ledger.Customer
		s.adm("POST", "/admin/v1/customers", `{"name":"c-`+code+`","currency":"`+code+`"}`, http.StatusCreated, &c)
		if c.Currency != strings.ToUpper(code) {
			t.Errorf("customer in %s: currency %q", code, c.Currency)
		}
	}
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"chf","input":"1","output":"1",`+from+`}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+cust+"/overrides", `{"model":"m","price":{"currency":"GBP","input":"1","output":"1"},`+from+`}`, http.StatusCreated, nil)
}
