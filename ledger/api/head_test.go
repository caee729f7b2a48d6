package api_test

import (
	"net/http"
	"testing"
)

// TestHeadIsAnsweredAsGet: every GET route of the admin API and of the
// customer API answers HEAD as it answers GET, without the body (RFC
// 9110, section 9.3.2: a general-purpose server supports both). An API
// review found HEAD refused with 405 on both, where the console and the
// portal answer it; an uptime check or a proxy's health probe sends HEAD.
func TestHeadIsAnsweredAsGet(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	customer, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	for _, tc := range []struct{ url, auth string }{
		{s.admin + "/healthz", ""},
		{s.admin + "/admin/v1/customers", adminToken},
		{s.admin + "/admin/v1/customers/" + customer + "/balance", adminToken},
		{s.admin + "/admin/v1/usage?group_by=model", adminToken},
		{s.llm + "/v1/usage", secret},
		{s.llm + "/v1/balance", secret},
	} {
		get, _, err := send(http.MethodGet, tc.url, tc.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		head, body, err := send(http.MethodHead, tc.url, tc.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		if get != http.StatusOK || head != get || len(body) != 0 {
			t.Errorf("%s: GET %d, HEAD %d with %d bytes; want HEAD as GET, no body", tc.url, get, head, len(body))
		}
	}
	// A HEAD the route's GET would refuse is refused alike.
	if get, _, _ := send(http.MethodGet, s.llm+"/v1/usage", "tg-not-a-key", ""); get != http.StatusUnauthorized {
		t.Fatalf("GET /v1/usage with a wrong key = %d; want 401", get)
	}
	if head, _, _ := send(http.MethodHead, s.llm+"/v1/usage", "tg-not-a-key", ""); head != http.StatusUnauthorized {
		t.Errorf("HEAD /v1/usage with a wrong key = %d; want 401 as GET", head)
	}
}
