package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCustomerAPIRefusesAnExpiredKey: once a key's expires_at has passed,
// the customer API answers it 401 on every route, as the LLM routes do:
// an expired key no longer reads its customer's balance, usage, keys or
// statements. A mutation audit: the customer API's authenticate taking
// an expired key passed every test.
func TestCustomerAPIRefusesAnExpiredKey(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, _, _ := s.customer(`{"name":"a","currency":"USD"}`)
	expires := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	var k struct {
		Secret string `json:"key"`
	}
	s.adm("POST", "/admin/v1/customers/"+c+"/keys", `{"name":"short","expires_at":"`+expires.Format(time.RFC3339)+`"}`, http.StatusCreated, &k)
	routes := []string{"/v1/balance", "/v1/key", "/v1/keys", "/v1/usage", "/v1/requests", "/v1/statements/" + time.Now().UTC().Format("2006-01")}
	for _, p := range routes {
		if status, body, err := send("GET", s.llm+p, k.Secret, ""); err != nil || status != http.StatusOK {
			t.Fatalf("GET %s before the key expires = %d %s %v", p, status, body, err)
		}
	}
	time.Sleep(time.Until(expires)) // until the expiry, not an assertion
	for _, p := range routes {
		status, body, err := send("GET", s.llm+p, k.Secret, "")
		if err != nil || status != http.StatusUnauthorized || !strings.Contains(string(body), "invalid_api_key") {
			t.Errorf("GET %s with a key expired at %s = %d %s %v; want 401 invalid_api_key", p, expires.Format(time.RFC3339), status, body, err)
		}
	}
}
