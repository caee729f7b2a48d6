package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestCommaInTimesRefused: RFC 3339 writes a second's fraction after a
// ".", and so do OpenAPI's patterns, but Go's parser also takes a ","
// (ISO 8601's other separator): a time so written was taken by the
// admin and customer APIs and refused by every generated client. Both a
// query's time and a body's are refused (400 naming the field), saying to
// write a ".".
func TestCommaInTimesRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	for _, c := range []struct{ method, url, auth, body, field string }{
		{"GET", s.admin + "/admin/v1/usage?from=2026-11-01T10:00:00,5Z", adminToken, "", "from"},
		{"GET", s.llm + "/v1/usage?to=2026-11-01T10:00:00,123456Z", secret, "", "to"},
		{"POST", s.admin + "/admin/v1/customers/" + cust + "/credits", adminToken, `{"amount":"1","effective_at":"2026-11-01T10:00:00,5Z"}`, "effective_at"},
	} {
		status, body, err := send(c.method, c.url, c.auth, c.body)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, c.url+" "+c.body, status, body, c.field)
		if !strings.Contains(string(body), `\".\"`) && !strings.Contains(string(body), `"."`) {
			t.Errorf("%s %s: %s; want it to say to write a \".\"", c.url, c.body, body)
		}
	}
	// A "." still reads.
	s.adm("GET", "/admin/v1/usage?customer_id="+cust+"&from=2026-11-01T10:00:00.5Z", "", http.StatusOK, nil)
	s.adm("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"1","effective_at":"2026-11-01T10:00:00.5Z"}`, http.StatusCreated, nil)
}
