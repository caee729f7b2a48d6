package api_test

import (
	"net/http"
	"testing"
)

// TestAnswersAreNotStored: every answer of the admin API and of the
// customer API, errors too, says no cache or browser may store it, nor
// read it as another type: a new key's secret, a customer's usage and
// request log. A review found the customer API's answers (reached with a
// key in the query string too, on the portal's origin) without either.
func TestAnswersAreNotStored(t *testing.T) {
	s := newServer(t)
	cust, _, secret := s.customer(`{"name":"acme"}`)
	for _, c := range []struct{ url, auth string }{
		{s.admin + "/admin/v1/customers", adminToken},
		{s.admin + "/admin/v1/customers/" + cust + "/keys", adminToken},
		{s.admin + "/admin/v1/customers", "wrong"},
		{s.llm + "/v1/balance", secret},
		{s.llm + "/v1/usage?group_by=model", secret},
		{s.llm + "/v1/requests", secret},
		{s.llm + "/v1/usage", "tg-wrong"},
		{s.llm + "/v1/balance?key=" + secret, ""},
	} {
		req, _ := http.NewRequest("GET", c.url, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", "Bearer "+c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s (%d): Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff", c.url, resp.StatusCode,
				resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"))
		}
	}
}
