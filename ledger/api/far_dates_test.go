package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestADateBeyond9999PoisonsNeitherPricesNorKeySync: a price version whose
// effective_to is a valid RFC 3339 time in 9999 with a negative offset
// ("9999-12-31T23:00:00-05:00", i.e. 10000-01-01T04:00Z) was accepted and
// stored, but could never be encoded again: the POST answered 500 after
// committing, GET /admin/v1/prices 500 from then on, and the key outbox
// change it queued could never be published (the publisher json-encodes
// the state), so every key change behind it (revocations, limit changes)
// stayed in the outbox. Such a time is now refused with 400.
func TestADateBeyond9999PoisonsNeitherPricesNorKeySync(t *testing.T) {
	s := newServer(t)
	status, body, err := send("POST", s.admin+"/admin/v1/prices", adminToken,
		`{"model":"m-y10k","currency":"USD","input":"1","output":"2","effective_from":"2026-01-01T00:00:00Z","effective_to":"9999-12-31T23:00:00-05:00"}`)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest {
		t.Errorf("POST /admin/v1/prices with effective_to beyond 9999 UTC = %d %s, want 400", status, body)
	}
	status, body, err = send("GET", s.admin+"/admin/v1/prices", adminToken, "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		t.Errorf("GET /admin/v1/prices afterwards = %d %s, want 200", status, body)
	}
	// A key revoked afterwards: its change is queued behind the price's.
	_, keyID, _ := s.customer(`{"name":"victim"}`)
	k, err := s.store.RevokeKey(context.Background(), keyID)
	if err != nil {
		t.Fatal(err)
	}
	// The key outbox, published as meter/keys.Publisher does (json.Marshal
	// of each state), as the syncer does it: passes until the outbox is empty.
	for range 3 {
		_, err = s.store.PublishKeyChanges(context.Background(), 100, func(_ context.Context, c usage.Changes) error {
			for _, v := range []any{c.Keys, c.Customers, c.Prices} {
				if _, err := json.Marshal(v); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		t.Errorf("publishing the key outbox: %v", err)
	}
	if pending, _ := s.store.KeyChangePending(context.Background(), k.Change); pending {
		t.Errorf("the revocation of key %s is still unpublished: the gateways keep accepting the revoked key", keyID)
	}
}

// TestAKeyExpiryBeyond9999IsRefused: a key created with expires_at
// "9999-12-31T23:00:00-05:00" was committed, but the answer that carried
// its secret (shown only once) was a 500: the key existed and counted, its
// secret was lost. Such an expiry is now refused with 400.
func TestAKeyExpiryBeyond9999IsRefused(t *testing.T) {
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"y10k"}`)
	status, body, err := send("POST", s.admin+"/admin/v1/customers/"+cust+"/keys", adminToken,
		`{"name":"late","expires_at":"9999-12-31T23:00:00-05:00"}`)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest {
		t.Errorf("POST keys with expires_at beyond 9999 UTC = %d %s, want 400", status, body)
	}
	status, body, err = send("GET", s.admin+"/admin/v1/customers/"+cust+"/keys", adminToken, "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		t.Errorf("GET the customer's keys afterwards = %d %s, want 200", status, body)
	}
}

// TestACreditInYear9999IsRefused: a credit with effective_at in 9999 was
// accepted and raised the balance (and so the customer's spendable
// budget), but GET …/entries (whose open end is 9999-01-01), every
// statement (periods stop at 9998) and every export (to stops at 9998)
// left it out: balance ≠ Σ entries, the identity the API documents for
// auditors. Times in bodies outside the years 0001 to 9998 (UTC) are now
// refused, as they are in queries.
func TestACreditInYear9999IsRefused(t *testing.T) {
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"far-future","credit_limit":"0"}`)
	for _, at := range []string{"9999-06-01T00:00:00Z", "0000-01-01T00:00:00Z", "9998-12-31T23:00:00-05:00"} {
		s.adm("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"1000","memo":"x","effective_at":"`+at+`"}`, http.StatusBadRequest, nil)
	}
	var bal struct {
		Balance string `json:"balance"`
	}
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &bal)
	if !dec(t, bal.Balance).IsZero() {
		t.Errorf("balance = %s after refused credits, want 0", bal.Balance)
	}
}

// TestExportAndReconcileFromTheFirstDay: the API takes times of the years
// 0001 to 9998, so from=0001-01-01 ("from the beginning") is a valid
// bound of an export or a reconciliation. It is Go's zero time, which the
// ledger took for a missing bound: both answered 400 "from and to are
// required" to a request that gave both. (Found by a review.)
func TestExportAndReconcileFromTheFirstDay(t *testing.T) {
	s := newServer(t)
	for _, path := range []string{"/admin/v1/export", "/admin/v1/reconciliation"} {
		for _, from := range []string{"0001-01-01", "0001-01-01T00:00:00Z"} {
			status, body, err := send("GET", s.admin+path+"?from="+from+"&to=2027-01-01", adminToken, "")
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusOK {
				t.Errorf("GET %s?from=%s&to=2027-01-01 = %d %s, want 200", path, from, status, body)
			}
		}
	}
}

// TestACreditDatedAheadIsRefused: a credit or an adjustment dated ahead of
// the ledger's clock moved the balance (and so the customer's budget) at
// once, spendable before it was effective, and the statement of the month
// it was dated in listed money spent in another. An entry may be dated
// back, or up to 5 minutes ahead (a clock running fast), not further.
func TestACreditDatedAheadIsRefused(t *testing.T) {
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"dated-ahead","credit_limit":"0"}`)
	for _, by := range []time.Duration{24 * time.Hour, 10 * time.Minute} {
		ahead := time.Now().Add(by).UTC().Format(time.RFC3339)
		for _, kind := range []string{"credits", "adjustments"} {
			status, body, err := send("POST", s.admin+"/admin/v1/customers/"+cust+"/"+kind, adminToken,
				`{"amount":"1000","memo":"next month","effective_at":"`+ahead+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusBadRequest || !strings.Contains(string(body), "effective_at") || !strings.Contains(string(body), "future") {
				t.Errorf("POST %s dated %v ahead = %d %s, want 400 naming effective_at", kind, by, status, body)
			}
		}
	}
	var bal struct {
		Balance string `json:"balance"`
	}
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &bal)
	if !dec(t, bal.Balance).IsZero() {
		t.Errorf("balance = %s after refused credits, want 0", bal.Balance)
	}
	back := time.Now().Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	fast := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	for _, at := range []string{back, fast} {
		s.adm("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"5","effective_at":"`+at+`"}`, http.StatusCreated, nil)
	}
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &bal)
	if !dec(t, bal.Balance).Equal(dec(t, "10")) {
		t.Errorf("balance = %s after credits dated back and a minute ahead, want 10", bal.Balance)
	}
}
