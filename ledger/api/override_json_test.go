package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestOverridesShowTheirTerms: an override shows its terms, a discount's
// discount_bp even when it is 0 (an operator ending a discount records a
// 0% override: it answered with neither discount_bp nor price, and a
// client could not tell what it was, a finance review), a custom price
// its price and no discount_bp.
func TestOverridesShowTheirTerms(t *testing.T) {
	s := newServer(t)
	var c ledger.Customer
	s.adm("POST", "/admin/v1/customers", `{"name":"terms"}`, http.StatusCreated, &c)
	path := "/admin/v1/customers/" + c.ID + "/overrides"
	zero := s.adm("POST", path, `{"model":"m0","discount_percent":"0","effective_from":"2026-07-04T00:00:00Z"}`, http.StatusCreated, nil)
	ten := s.adm("POST", path, `{"model":"m10","discount_percent":"10","effective_from":"2026-07-04T00:00:00Z"}`, http.StatusCreated, nil)
	custom := s.adm("POST", path, `{"model":"mc","price":{"currency":"USD","input":"1","output":"2"},"effective_from":"2026-07-04T00:00:00Z"}`, http.StatusCreated, nil)
	for _, c := range []struct {
		name string
		body []byte
		want map[string]bool // member: present
	}{
		{"0% off", zero, map[string]bool{"discount_bp": true, "price": false}},
		{"10% off", ten, map[string]bool{"discount_bp": true, "price": false}},
		{"a custom price", custom, map[string]bool{"discount_bp": false, "price": true}},
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(c.body, &m); err != nil {
			t.Fatal(err)
		}
		for member, present := range c.want {
			if _, ok := m[member]; ok != present {
				t.Errorf("%s: %s; want %s present: %v", c.name, c.body, member, present)
			}
		}
	}
	list := string(s.adm("GET", path, "", http.StatusOK, nil))
	if !strings.Contains(list, `"model":"m0","effective_from":"2026-07-04T00:00:00Z","discount_bp":0}`) {
		t.Errorf("the list: %s; want the 0%% override's discount_bp", list)
	}
	// The client reads them back.
	os, err := s.client().Overrides(t.Context(), c.ID)
	if err != nil || len(os) != 3 || os[1].DiscountBP != 1000 || os[2].Price == nil {
		t.Fatalf("the client's overrides: %+v, %v", os, err)
	}
}
