package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPatchesThatChangeNothingAreRefused: a PATCH of a customer or a key
// with no field answered 200 and moved updated_at, where the CLI refuses
// the same request ("nothing to change"): a client that misspelt every
// field it meant to send (the API refuses unknown fields, but not an empty
// object) was told its change was made. It is 400, naming what may change.
func TestPatchesThatChangeNothingAreRefused(t *testing.T) {
	s := newServer(t)
	id, keyID, _ := s.customer(`{"name":"acme"}`)
	for _, path := range []string{"/admin/v1/customers/" + id, "/admin/v1/keys/" + keyID} {
		status, body, err := send(http.MethodPatch, s.admin+path, adminToken, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, "PATCH "+path+" {}", status, body, "nothing to change")
	}
	// One field is a change, as before.
	s.adm(http.MethodPatch, "/admin/v1/customers/"+id, `{"name":"acme 2"}`, http.StatusOK, nil)
	s.adm(http.MethodPatch, "/admin/v1/keys/"+keyID, `{"rpm_limit":60}`, http.StatusOK, nil)
}

// TestUsageOfAnUnknownCustomerIsNotFound: the admin API's usage of a
// customer id no customer has answered 200 with no rows, which reads as
// a customer who has used nothing, where its balance, entries and
// statements are 404. It is 404 too.
func TestUsageOfAnUnknownCustomerIsNotFound(t *testing.T) {
	s := newServer(t)
	id, _, _ := s.customer(`{"name":"acme"}`)
	s.adm(http.MethodGet, "/admin/v1/usage?customer_id="+id+"&group_by=model", "", http.StatusOK, nil)
	b := s.adm(http.MethodGet, "/admin/v1/usage?customer_id=00000000-0000-0000-0000-000000000000&group_by=model", "",
		http.StatusNotFound, nil)
	if !strings.Contains(string(b), "not found") {
		t.Errorf("usage of an unknown customer: %s, want the customer named not found", b)
	}
}
