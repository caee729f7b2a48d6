package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// errorMessage is the message of an error answer, failing the test
// unless it is one with status want.
func errorMessage(t *testing.T, what string, want, status int, body []byte) string {
	t.Helper()
	var e apiError
	if status != want || json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		t.Fatalf("%s = %d %s, want %d with an error message", what, status, body, want)
	}
	return e.Error.Message
}

// TestCustomerUsageParametersListed: a customer's misspelt parameter on
// GET /v1/usage is refused with the parameters the route takes, and
// customer_id is not among them. A customer review: ?form=2026-01-01 was
// answered "(it takes key_id, model, end_user, from, to, group_by, limit,
// cursor, key, customer_id)", and customer_id, sent as told, was then
// refused as not available here.
func TestCustomerUsageParametersListed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	status, body, err := send("GET", s.llm+"/v1/usage?form=2026-01-01", secret, "")
	if err != nil {
		t.Fatal(err)
	}
	msg := errorMessage(t, "GET /v1/usage?form=", http.StatusBadRequest, status, body)
	if !strings.HasPrefix(msg, "form: ") || !strings.Contains(msg, "group_by") || strings.Contains(msg, "customer_id") {
		t.Errorf("GET /v1/usage?form= says %q; want the parameters it takes, without customer_id", msg)
	}
	// customer_id itself still gets the sentence that says why.
	status, body, err = send("GET", s.llm+"/v1/usage?customer_id=00000000-0000-0000-0000-000000000000", secret, "")
	if err != nil {
		t.Fatal(err)
	}
	if msg := errorMessage(t, "GET /v1/usage?customer_id=", http.StatusBadRequest, status, body); !strings.Contains(msg, "your own usage") {
		t.Errorf("GET /v1/usage?customer_id= says %q; want it to say this API shows the caller's own usage", msg)
	}
}
