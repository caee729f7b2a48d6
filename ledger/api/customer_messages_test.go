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

// TestCustomerRequestNotFoundNamesRequest: the customer API's 404 for a
// request id it does not find calls it a request, as its 400 does
// ("request id ... is not valid"), not the ledger's event: a customer
// review was answered "event <id> not found" for the X-Request-Id of a
// request refused before it reached the ledger.
func TestCustomerRequestNotFoundNamesRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	const id = "0197a3c2-1111-7222-8333-444455556666"
	status, body, err := send("GET", s.llm+"/v1/requests/"+id, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	if msg := errorMessage(t, "GET /v1/requests/{unknown}", http.StatusNotFound, status, body); msg != "request "+id+" not found" {
		t.Errorf("GET /v1/requests/{unknown} says %q; want %q", msg, "request "+id+" not found")
	}
}

// TestSpaceBeforeTimeIsExplained: a time whose date and time are
// separated by a space (Python's str(datetime), which its HTTP clients
// encode with its offset's "+" as %2B) is refused saying to write a "T",
// not that a "+" must be sent as %2B, which it was. An unencoded offset
// "+" still gets that hint.
func TestSpaceBeforeTimeIsExplained(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	status, body, err := send("GET", s.llm+"/v1/usage?from=2026-11-01+10:00:00%2B00:00", secret, "")
	if err != nil {
		t.Fatal(err)
	}
	msg := errorMessage(t, "from with a space before the time", http.StatusBadRequest, status, body)
	if !strings.Contains(msg, `"T"`) || strings.Contains(msg, "%2B") {
		t.Errorf("from=2026-11-01 10:00:00+00:00 says %q; want it to say to write a \"T\", without the %%2B hint", msg)
	}
	status, body, err = send("GET", s.llm+"/v1/usage?from=2026-11-01T10:00:00+05:30", secret, "")
	if err != nil {
		t.Fatal(err)
	}
	if msg := errorMessage(t, "from with an unencoded +", http.StatusBadRequest, status, body); !strings.Contains(msg, "%2B") || strings.Contains(msg, `"T"`) {
		t.Errorf("from=2026-11-01T10:00:00 05:30 says %q; want the %%2B hint alone", msg)
	}
}
