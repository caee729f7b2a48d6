package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// postIdempotent POSTs body to the admin API's path with the admin token
// and, when key is not empty, an Idempotency-Key header.
func (s *server) postIdempotent(path, key, body string) (int, []byte) {
	s.t.Helper()
	if key == "" {
		return s.postWith(path, body)
	}
	return s.postWith(path, body, "Idempotency-Key", key)
}

// postWith POSTs body to the admin API's path with the admin token and
// hdr's name, value pairs as headers (an empty value sent as such).
func (s *server) postWith(path, body string, hdr ...string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.admin+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header[http.CanonicalHeaderKey(hdr[i])] = []string{hdr[i+1]}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestEmptyIdempotencyKeyHeaderRefused: an Idempotency-Key header sent
// with no value (a script's unset variable) is refused with 400 on every
// operation that takes one, and nothing is made. It was taken for no key:
// each retry made another customer, key, credit or adjustment, as the
// CLI's blank --idempotency-key did before it was refused.
func TestEmptyIdempotencyKeyHeaderRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"empty-key"}`)
	for _, c := range []struct{ path, body string }{
		{"/admin/v1/customers", `{"name":"made-twice?"}`},
		{"/admin/v1/customers/" + cust + "/keys", `{"name":"made-twice?"}`},
		{"/admin/v1/customers/" + cust + "/credits", `{"amount":"5"}`},
		{"/admin/v1/customers/" + cust + "/adjustments", `{"amount":"5"}`},
	} {
		for _, v := range []string{"", "  "} {
			status, b := s.postWith(c.path, c.body, "Idempotency-Key", v)
			invalid(t, "POST "+c.path+" with an empty Idempotency-Key", status, b, "Idempotency-Key")
		}
	}
	var page struct {
		Customers []ledger.Customer `json:"data"`
	}
	s.adm("GET", "/admin/v1/customers", "", http.StatusOK, &page)
	var keys struct {
		Keys []json.RawMessage `json:"data"`
	}
	s.adm("GET", "/admin/v1/customers/"+cust+"/keys", "", http.StatusOK, &keys)
	var bal ledger.Balance
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &bal)
	if len(page.Customers) != 1 || len(keys.Keys) != 1 || bal.Balance != "0" {
		t.Errorf("after refused posts: %d customers, %d keys, balance %s; want 1, 1 and 0 (nothing made)",
			len(page.Customers), len(keys.Keys), bal.Balance)
	}
}

// TestCreateCustomerIsIdempotent: a customer created with an idempotency
// key (the Idempotency-Key header or the body's idempotency_key) is made
// once: a retry with the same request answers 201 with the first customer,
// even after it was renamed, also when the retries race; the same key with
// another request is 409 naming the customer; a header unlike the body's
// key is 400. The header changed nothing: an operator's retry after a lost
// answer made a second customer.
func TestCreateCustomerIsIdempotent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const body = `{"name":"idem-acme","currency":"eur","credit_limit":"10"}`
	var first ledger.Customer
	status, b := s.postIdempotent("/admin/v1/customers", "cust-1", body)
	if status != http.StatusCreated || json.Unmarshal(b, &first) != nil || first.ID == "" {
		t.Fatalf("POST /customers with Idempotency-Key = %d %s, want 201", status, b)
	}
	// The same request, its key in the header, in the body or in both,
	// and spelled differently where the API normalizes it.
	for _, again := range []struct{ header, body string }{
		{"cust-1", body},
		{"", `{"name":"idem-acme","currency":"EUR","credit_limit":"10.00","idempotency_key":"cust-1"}`},
		{"cust-1", `{"name":" idem-acme ","currency":"eur","credit_limit":"10","idempotency_key":"cust-1"}`},
	} {
		var c ledger.Customer
		status, b := s.postIdempotent("/admin/v1/customers", again.header, again.body)
		if status != http.StatusCreated || json.Unmarshal(b, &c) != nil || c.ID != first.ID {
			t.Errorf("POST /customers %s again (header %q) = %d %s, want 201 with customer %s", again.body, again.header, status, b, first.ID)
		}
	}
	s.adm("PATCH", "/admin/v1/customers/"+first.ID, `{"name":"renamed"}`, http.StatusOK, nil)
	var c ledger.Customer
	status, b = s.postIdempotent("/admin/v1/customers", "cust-1", body)
	if status != http.StatusCreated || json.Unmarshal(b, &c) != nil || c.ID != first.ID || c.Name != "renamed" {
		t.Errorf("POST /customers again after a rename = %d %s, want 201 with customer %s as it is now", status, b, first.ID)
	}
	var e apiError
	status, b = s.postIdempotent("/admin/v1/customers", "cust-1", `{"name":"idem-acme","currency":"eur","credit_limit":"20"}`)
	if status != http.StatusConflict || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, first.ID) {
		t.Errorf("POST /customers with the same Idempotency-Key and another credit limit = %d %s, want 409 naming %s", status, b, first.ID)
	}
	status, b = s.postIdempotent("/admin/v1/customers", "cust-1", `{"name":"idem-acme","idempotency_key":"other"}`)
	invalid(t, "an Idempotency-Key header unlike the body's idempotency_key", status, b, "Idempotency-Key")
	status, b = s.postIdempotent("/admin/v1/customers", strings.Repeat("k", ledger.MaxIdempotencyKeyLen+1), body)
	invalid(t, "an idempotency key too long", status, b, "idempotency_key")

	// Racing retries make one customer.
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			status, b := s.postIdempotent("/admin/v1/customers", "cust-race", `{"name":"idem-race"}`)
			var c ledger.Customer
			if status != http.StatusCreated || json.Unmarshal(b, &c) != nil {
				t.Errorf("racing POST /customers = %d %s, want 201", status, b)
			}
			ids[i] = c.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("racing creates answered customers %v, want one", ids)
		}
	}
	var page ledger.CustomerPage
	s.adm("GET", "/admin/v1/customers?name=idem-race", "", http.StatusOK, &page)
	if len(page.Data) != 1 {
		t.Errorf("%d customers named idem-race after %d racing creates with one key, want 1", len(page.Data), n)
	}
	// Without a key, each create is a customer, as before.
	s.adm("POST", "/admin/v1/customers", `{"name":"idem-race"}`, http.StatusCreated, nil)
	s.adm("GET", "/admin/v1/customers?name=idem-race", "", http.StatusOK, &page)
	if len(page.Data) != 2 {
		t.Errorf("%d customers named idem-race after a create without a key, want 2", len(page.Data))
	}
}

// TestCreateKeyIsIdempotent: a key created with an idempotency key is
// made once. Its secret is shown only in the first answer (the ledger
// keeps its hash), so a retry answers 409 naming the key made, and saying
// to revoke it if the secret was not received, also when the retries race,
// after the key was revoked, and after its expires_at has passed; the same
// idempotency key with another request, or for another customer, is 409
// too. The header changed nothing: a retry after a lost answer made a
// second live key.
func TestCreateKeyIsIdempotent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var cust, other ledger.Customer
	s.adm("POST", "/admin/v1/customers", `{"name":"idem-keys"}`, http.StatusCreated, &cust)
	s.adm("POST", "/admin/v1/customers", `{"name":"idem-keys-other"}`, http.StatusCreated, &other)
	path := "/admin/v1/customers/" + cust.ID + "/keys"
	expiry := time.Now().Add(2 * time.Second)
	expires := expiry.UTC().Format(time.RFC3339Nano)
	body := `{"name":"ci","rpm_limit":60,"expires_at":"` + expires + `"}`
	var first struct {
		ID     string `json:"id"`
		Secret string `json:"key"`
	}
	status, b := s.postIdempotent(path, "key-1", body)
	if status != http.StatusCreated || json.Unmarshal(b, &first) != nil || first.Secret == "" {
		t.Fatalf("POST %s with Idempotency-Key = %d %s, want 201 with the secret", path, status, b)
	}
	replayed := func(what string, status int, b []byte) {
		t.Helper()
		var e apiError
		if status != http.StatusConflict || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, first.ID) ||
			!strings.Contains(e.Error.Message, "revoke") || strings.Contains(string(b), first.Secret) {
			t.Errorf("%s = %d %s, want 409 naming key %s and saying to revoke it, without its secret", what, status, b, first.ID)
		}
	}
	status, b = s.postIdempotent(path, "key-1", body)
	replayed("POST the same key again", status, b)
	status, b = s.postIdempotent(path, "", `{"name":"ci","rpm_limit":60,"expires_at":"`+expires+`","idempotency_key":"key-1"}`)
	replayed("POST the same key again, the idempotency key in the body", status, b)
	var e apiError
	status, b = s.postIdempotent(path, "key-1", `{"name":"ci","rpm_limit":61,"expires_at":"`+expires+`"}`)
	if status != http.StatusConflict || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, "different") {
		t.Errorf("POST a key with the same Idempotency-Key and another rpm_limit = %d %s, want 409 saying the request differs", status, b)
	}
	status, b = s.postIdempotent("/admin/v1/customers/"+other.ID+"/keys", "key-1", body)
	if status != http.StatusConflict {
		t.Errorf("POST another customer's key with the same Idempotency-Key = %d %s, want 409", status, b)
	}

	// Racing retries make one key; each of the others is told its id.
	const n = 20
	var created sync.Map
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, b := s.postIdempotent(path, "key-race", `{"name":"race"}`)
			switch status {
			case http.StatusCreated:
				var k struct {
					ID string `json:"id"`
				}
				if json.Unmarshal(b, &k) == nil {
					created.Store(k.ID, true)
				}
			case http.StatusConflict:
			default:
				t.Errorf("racing POST %s = %d %s, want 201 or 409", path, status, b)
			}
		})
	}
	wg.Wait()
	var keys ledger.KeyPage
	s.adm("GET", path, "", http.StatusOK, &keys)
	race := 0
	for _, k := range keys.Data {
		if k.Name == "race" {
			race++
		}
	}
	made := 0
	created.Range(func(any, any) bool { made++; return true })
	if race != 1 || made != 1 {
		t.Errorf("%d racing creates with one Idempotency-Key made %d keys, %d answered 201; want 1 and 1", n, race, made)
	}

	// A revoked key, or one whose expires_at has passed, is still the one
	// the idempotency key made.
	s.adm("POST", "/admin/v1/keys/"+first.ID+"/revoke", "", http.StatusOK, nil)
	time.Sleep(time.Until(expiry) + 100*time.Millisecond)
	status, b = s.postIdempotent(path, "key-1", body)
	replayed("POST the same key again after it was revoked and expired", status, b)
	s.adm("GET", path, "", http.StatusOK, &keys)
	if len(keys.Data) != 2 {
		t.Errorf("%d keys after the retries, want 2 (ci and race)", len(keys.Data))
	}
}

// TestRetriedKeyCreateOfARevokedKey: a key's create retried with its
// idempotency key after that key was revoked still answers 409 naming
// it, but said "if it was not received, revoke that key": it is revoked
// already, and the answer must say so rather than send the operator to
// revoke it.
func TestRetriedKeyCreateOfARevokedKey(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"idem-revoked"}`)
	path, body := "/admin/v1/customers/"+cust+"/keys", `{"name":"ci"}`
	var k ledger.Key
	status, b := s.postIdempotent(path, "revoked-1", body)
	if status != http.StatusCreated || json.Unmarshal(b, &k) != nil || k.ID == "" {
		t.Fatalf("POST %s = %d %s, want 201", path, status, b)
	}
	s.adm("POST", "/admin/v1/keys/"+k.ID+"/revoke", "", http.StatusOK, nil)
	status, b = s.postIdempotent(path, "revoked-1", body)
	if status != http.StatusConflict || !strings.Contains(string(b), k.ID) || !strings.Contains(string(b), "was revoked") ||
		strings.Contains(string(b), "revoke that key") {
		t.Fatalf("POST %s retried after key %s was revoked = %d %s; want 409 naming it and saying it was revoked, "+
			"not to revoke it", path, k.ID, status, b)
	}
}

// TestIdempotencyKeyNotUTF8InTheBody: a body's idempotency_key that is
// not UTF-8 was read with each bad byte as U+FFFD (encoding/json's way),
// so that two different keys, "x\xfey" and "x\xffy", were one: the
// second create answered the first one's customer. The header's key is
// refused (400) for the same bytes; so must the body be.
func TestIdempotencyKeyNotUTF8InTheBody(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, body := range []string{"{\"name\":\"bytes\",\"idempotency_key\":\"x\xfey\"}", "{\"name\":\"bytes\",\"idempotency_key\":\"x\xffy\"}"} {
		if status, b := s.postIdempotent("/admin/v1/customers", "", body); status != http.StatusBadRequest || !strings.Contains(string(b), "UTF-8") {
			t.Errorf("POST /customers %q = %d %s; want 400 saying the body is not UTF-8", body, status, b)
		}
	}
}
