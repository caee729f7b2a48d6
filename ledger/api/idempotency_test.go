package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestIdempotencyKeyRace: requests racing with one idempotency key, some
// with the same body and some with another amount or memo, make exactly one
// entry: every request with the first-made entry's body gets it (201),
// every other gets 409, and the balance moves once.
func TestIdempotencyKeyRace(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, kind := range []string{"credits", "adjustments"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cust, _, _ := s.customer(`{"name":"race-` + kind + `"}`)
			path := s.admin + "/admin/v1/customers/" + cust + "/" + kind
			credited := decimal.Zero
			for round := range 5 {
				key := fmt.Sprintf("%s-race-%d", kind, round)
				bodies := []string{
					`{"amount":"10","memo":"top-up","idempotency_key":"` + key + `"}`,
					`{"amount":"20","memo":"top-up","idempotency_key":"` + key + `"}`,
					`{"amount":"10","memo":"other","idempotency_key":"` + key + `"}`,
				}
				const n = 30
				type answer struct {
					variant, status int
					body            []byte
					err             error
				}
				answers := make([]answer, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						status, body, err := send("POST", path, adminToken, bodies[i%len(bodies)])
						answers[i] = answer{i % len(bodies), status, body, err}
					})
				}
				close(start)
				wg.Wait()

				winner, id := -1, int64(0)
				for _, a := range answers {
					if a.err != nil {
						t.Fatal(a.err)
					}
					if a.status == http.StatusCreated {
						var e ledger.Entry
						if err := json.Unmarshal(a.body, &e); err != nil {
							t.Fatal(err)
						}
						if winner == -1 {
							winner, id = a.variant, e.ID
						}
						if a.variant != winner || e.ID != id {
							t.Fatalf("round %d: 201 for body %d (entry %d) and body %d (entry %d)", round, winner, id, a.variant, e.ID)
						}
					}
				}
				if winner == -1 {
					t.Fatalf("round %d: no request made the entry: %+v", round, answers)
				}
				for _, a := range answers {
					var e apiError
					switch {
					case a.variant == winner && a.status != http.StatusCreated:
						t.Errorf("round %d: the first entry's own body got %d %s, want 201", round, a.status, a.body)
					case a.variant != winner && (a.status != http.StatusConflict || json.Unmarshal(a.body, &e) != nil ||
						e.Error.Code != ledger.EConflict || !strings.Contains(e.Error.Message, "idempotency_key")):
						t.Errorf("round %d: a different body (%d, first was %d) got %d %s, want 409", round, a.variant, winner, a.status, a.body)
					}
				}
				credited = credited.Add(dec(t, map[int]string{0: "10", 1: "20", 2: "10"}[winner]))
			}
			var entries struct{ Data []ledger.Entry }
			s.adm("GET", "/admin/v1/customers/"+cust+"/entries", "", http.StatusOK, &entries)
			var b ledger.Balance
			s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &b)
			if len(entries.Data) != 5 || !dec(t, b.Balance).Equal(credited) {
				t.Errorf("%d entries, balance %s; want 5 entries, balance %s", len(entries.Data), b.Balance, credited)
			}
		})
	}
}

// TestIdempotencyKeyReuse: a retry with the same body is the first entry;
// a reuse with any other field different is 409 naming it; effective_at
// is compared only when the retry gives it.
func TestIdempotencyKeyReuse(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"acme"}`)
	other, _, _ := s.customer(`{"name":"other"}`)
	credits := "/admin/v1/customers/" + cust + "/credits"
	first := `{"amount":"5","memo":"jan","effective_at":"2026-01-01T00:00:00Z","idempotency_key":"k1"}`
	var e1, e2 ledger.Entry
	s.adm("POST", credits, first, http.StatusCreated, &e1)
	s.adm("POST", credits, first, http.StatusCreated, &e2)
	if e1 != e2 {
		t.Fatalf("retry = %+v, want the first entry %+v", e2, e1)
	}
	s.adm("POST", credits, `{"amount":"5.000","memo":" jan ","idempotency_key":"k1"}`, http.StatusCreated, &e2)
	if e1 != e2 {
		t.Fatalf("retry without effective_at = %+v, want the first entry %+v", e2, e1)
	}
	for _, tc := range []struct{ path, body, differs string }{
		{credits, `{"amount":"6","memo":"jan","idempotency_key":"k1"}`, "amount"},
		{credits, `{"amount":"5","memo":"feb","idempotency_key":"k1"}`, "memo"},
		{credits, `{"amount":"5","memo":"jan","effective_at":"2026-02-01T00:00:00Z","idempotency_key":"k1"}`, "effective at"},
		{"/admin/v1/customers/" + cust + "/adjustments", `{"amount":"5","memo":"jan","idempotency_key":"k1"}`, "kind"},
		{"/admin/v1/customers/" + other + "/credits", `{"amount":"5","memo":"jan","idempotency_key":"k1"}`, "customer"},
	} {
		status, body, err := send("POST", s.admin+tc.path, adminToken, tc.body)
		var e apiError
		if err != nil || status != http.StatusConflict || json.Unmarshal(body, &e) != nil ||
			!strings.Contains(e.Error.Message, "the "+tc.differs+" differs") {
			t.Errorf("POST %s %s = %d %s, %v; want 409 saying the %s differs", tc.path, tc.body, status, body, err, tc.differs)
		}
	}
	status, body, _ := send("POST", s.admin+credits, adminToken, `{"amount":"5","idempotency_key":"refund:0197a3d0"}`)
	invalid(t, "a key with the refund: prefix", status, body, "idempotency_key")
	var b ledger.Balance
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &b)
	if b.Balance != "5" {
		t.Errorf("balance = %s, want 5 (one credit)", b.Balance)
	}
}

// TestRefundAndReversalAreIdempotentByTheirTarget: as README and
// docs/billing.md say, a refund and a reversal take no idempotency_key
// (400 naming it) and are made once per event or entry: a second one,
// whatever its memo, answers 201 with the first entry, and the balance
// moves once.
func TestRefundAndReversalAreIdempotentByTheirTarget(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, _ := s.customer(`{"name":"acme"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"10","output":"10","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	e := event(cust, key, "m", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1_000_000})
	s.write(e) // $10
	var credit ledger.Entry
	s.adm("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"3"}`, http.StatusCreated, &credit)

	for _, path := range []string{"/admin/v1/events/" + e.ID + "/refund", fmt.Sprintf("/admin/v1/entries/%d/reverse", credit.ID)} {
		status, body, _ := send("POST", s.admin+path, adminToken, `{"idempotency_key":"r1"}`)
		invalid(t, path+" with an idempotency_key", status, body, "idempotency_key")
		var first, second ledger.Entry
		s.adm("POST", path, `{"memo":"outage"}`, http.StatusCreated, &first)
		s.adm("POST", path, `{"memo":"a different memo"}`, http.StatusCreated, &second)
		if first != second || second.Memo != "outage" {
			t.Errorf("POST %s again = %+v, want the first entry %+v", path, second, first)
		}
	}
	var b ledger.Balance
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &b)
	if b.Balance != "0" { // −10 charged + 3 credited + 10 refunded − 3 reversed
		t.Errorf("balance = %s, want 0 (one refund, one reversal)", b.Balance)
	}
}

// TestIdempotencyKeyHeader: a credit or an adjustment whose key comes in
// the Idempotency-Key header (the IETF httpapi draft's, Stripe's and
// most payment APIs' spelling) is as idempotent as one with the body's
// idempotency_key: a retry with the same body is the first entry and the
// balance moves once, another body is 409, and a header that disagrees
// with the body's key is 400. The header was ignored: a client retrying a
// top-up with it was credited twice, and a reuse with another amount
// credited again instead of being refused.
func TestIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	post := s.postIdempotent
	for _, kind := range []string{"credits", "adjustments"} {
		cust, _, _ := s.customer(`{"name":"header-` + kind + `"}`)
		path := "/admin/v1/customers/" + cust + "/" + kind
		key := "topup-" + cust
		var first, again ledger.Entry
		status, b := post(path, key, `{"amount":"5","memo":"jan"}`)
		if status != http.StatusCreated || json.Unmarshal(b, &first) != nil {
			t.Fatalf("POST %s with Idempotency-Key = %d %s, want 201", path, status, b)
		}
		status, b = post(path, key, `{"amount":"5","memo":"jan"}`)
		if status != http.StatusCreated || json.Unmarshal(b, &again) != nil || again != first {
			t.Errorf("POST %s again with the same Idempotency-Key = %d %s, want 201 with the first entry %+v", path, status, b, first)
		}
		if first.IdempotencyKey != key {
			t.Errorf("entry's idempotency_key = %q, want the header's %q", first.IdempotencyKey, key)
		}
		var e apiError
		status, b = post(path, key, `{"amount":"6","memo":"jan"}`)
		if status != http.StatusConflict || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, "the amount differs") {
			t.Errorf("POST %s with the same Idempotency-Key and another amount = %d %s, want 409 saying the amount differs", path, status, b)
		}
		status, b = post(path, key, `{"amount":"5","memo":"jan","idempotency_key":"`+key+`"}`)
		if status != http.StatusCreated || json.Unmarshal(b, &again) != nil || again != first {
			t.Errorf("POST %s with the key in the header and the body = %d %s, want 201 with the first entry", path, status, b)
		}
		status, b = post(path, key, `{"amount":"5","memo":"jan","idempotency_key":"other"}`)
		invalid(t, "an Idempotency-Key header unlike the body's idempotency_key", status, b, "Idempotency-Key")
		var bal ledger.Balance
		s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &bal)
		if bal.Balance != "5" {
			t.Errorf("%s: balance = %s, want 5 (one entry)", kind, bal.Balance)
		}
	}
}
