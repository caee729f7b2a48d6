package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestACreditFinerThanTheCurrencyIsRefused: a credit of 0.001 USD (a
// tenth of a cent, below the currency's minor unit) was recorded as typed,
// as was 10.005 JPY (a yen has no decimals: most likely 10,005 written with
// a thousands separator). A credit or an adjustment with more decimals than
// its customer's currency has (ISO 4217's minor unit) is refused with 400
// naming the minor unit, unless the request says it means it
// (allow_sub_minor, as the console's form sent again does): nothing moves.
func TestACreditFinerThanTheCurrencyIsRefused(t *testing.T) {
	s := newServer(t)
	usd, _, _ := s.customer(`{"name":"dollars"}`)
	var jpy, kwd ledger.Customer
	s.adm("POST", "/admin/v1/customers", `{"name":"yen","currency":"JPY"}`, http.StatusCreated, &jpy)
	s.adm("POST", "/admin/v1/customers", `{"name":"dinars","currency":"KWD"}`, http.StatusCreated, &kwd)
	for _, tc := range []struct{ cust, kind, amount, want string }{
		{usd, "credits", "0.001", "USD's minor unit is 0.01 (2 decimal places)"},
		{usd, "credits", "10.125", "USD's minor unit is 0.01 (2 decimal places)"},
		{usd, "adjustments", "-0.005", "USD's minor unit is 0.01 (2 decimal places)"},
		{jpy.ID, "credits", "10.005", "JPY's minor unit is 1 (0 decimal places)"},
		{jpy.ID, "adjustments", "0.5", "JPY's minor unit is 1 (0 decimal places)"},
		{kwd.ID, "credits", "1.0005", "KWD's minor unit is 0.001 (3 decimal places)"},
	} {
		what := "POST " + tc.kind + " " + tc.amount
		status, body, err := send("POST", s.admin+"/admin/v1/customers/"+tc.cust+"/"+tc.kind, adminToken, `{"amount":"`+tc.amount+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, what, status, body, "amount")
		if !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), "allow_sub_minor") {
			t.Errorf("%s = %s, want it to say %q and how to record it anyway", what, body, tc.want)
		}
	}
	balance := func(id string) string {
		var bal struct {
			Balance string `json:"balance"`
		}
		s.adm("GET", "/admin/v1/customers/"+id+"/balance", "", http.StatusOK, &bal)
		return bal.Balance
	}
	for _, id := range []string{usd, jpy.ID, kwd.ID} {
		if b := balance(id); !dec(t, b).IsZero() {
			t.Errorf("balance = %s after refused entries, want 0", b)
		}
	}
	// Whole minor units pass, trailing zeros too; allow_sub_minor records
	// the finer amount as typed.
	s.adm("POST", "/admin/v1/customers/"+usd+"/credits", `{"amount":"10.50"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+usd+"/adjustments", `{"amount":"-0.010000"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+jpy.ID+"/credits", `{"amount":"1000.000"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+kwd.ID+"/credits", `{"amount":"1.005"}`, http.StatusCreated, nil)
	var e ledger.Entry
	s.adm("POST", "/admin/v1/customers/"+usd+"/credits", `{"amount":"0.001","allow_sub_minor":true}`, http.StatusCreated, &e)
	if e.Amount != "0.001" {
		t.Errorf("0.001 USD with allow_sub_minor: entry %+v", e)
	}
	for id, want := range map[string]string{usd: "10.491", jpy.ID: "1000", kwd.ID: "1.005"} {
		if b := balance(id); !dec(t, b).Equal(dec(t, want)) {
			t.Errorf("balance = %s, want %s", b, want)
		}
	}
}
