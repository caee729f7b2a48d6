package api_test

import (
	"net/http"
	"testing"
	"time"
)

// TestCustomerAnswersRunNothing: the customer API answers on the portal's
// origin (the LLM listener), reached with a key in the query string too,
// and echoes what a customer chose (an end user's id, a memo, a model
// name, "<script>" included). docs/console.md says every answer of the LLM
// listener beside the portal is never a page: nosniff, and a
// Content-Security-Policy under which nothing runs, loads or frames, as
// the gateway's own answers carry. The customer API's (its statement's CSV
// too) had no policy, so a browser that rendered one, framed it or read it
// as a page had nothing to stop it; the admin API's, on the console's
// origin, neither.
func TestCustomerAnswersRunNothing(t *testing.T) {
	const runNothing = "default-src 'none'; frame-ancestors 'none'; sandbox"
	s := newServer(t)
	cust, _, secret := s.customer(`{"name":"acme"}`)
	period := time.Now().UTC().Format("2006-01")
	for _, c := range []struct{ url, auth string }{
		{s.llm + "/v1/balance", secret},
		{s.llm + "/v1/usage?group_by=end_user", secret},
		{s.llm + "/v1/requests", secret},
		{s.llm + "/v1/statements/" + period + "?format=csv", secret},
		{s.llm + "/v1/usage", "tg-wrong"},
		{s.llm + "/v1/balance?key=" + secret, ""},
		{s.admin + "/admin/v1/customers", adminToken},
		{s.admin + "/admin/v1/customers/" + cust + "/statements/" + period + "?format=csv", adminToken},
		{s.admin + "/admin/v1/customers", "wrong"},
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
		if got := resp.Header.Get("Content-Security-Policy"); got != runNothing {
			t.Errorf("GET %s (%d): Content-Security-Policy %q; want %q", c.url, resp.StatusCode, got, runNothing)
		}
	}
}
