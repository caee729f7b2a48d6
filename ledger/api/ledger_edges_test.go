package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateLeavesARefundedEventAlone: an event refunded in full and then
// re-rated downward (a promotion or discount added retroactively) must
// not leave the customer with a net credit for it: the refund already gave
// back the whole charge, and a refund is final. (Found by a review: the
// rerate entry credited the difference on top of the refund.)
func TestRerateLeavesARefundedEventAlone(t *testing.T) {
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"10","output":"10","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	e := event(cust, key, "m", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1_000_000})
	s.write(e) // 1M tokens × $10/M = $10

	var refund ledger.Entry
	s.adm("POST", "/admin/v1/events/"+e.ID+"/refund", `{"memo":"outage"}`, http.StatusCreated, &refund)
	if refund.Amount != "10" {
		t.Fatalf("refund = %s, want 10", refund.Amount)
	}
	// Finance corrects January's price retroactively (a promotion at $6/M)
	// and re-rates January.
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"6","output":"6","effective_from":"2026-01-02T00:00:00Z","effective_to":"2026-02-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2026-02-01"}`, http.StatusOK, nil)

	var b ledger.Balance
	s.call("GET", s.llm+"/v1/balance", secret, "", http.StatusOK, &b)
	// Charged 10, refunded 10: whatever the price, the customer owes 0 and
	// is owed 0 for this event.
	if dec(t, b.Balance).Sign() != 0 {
		t.Errorf("balance after refund then downward re-rate = %s %s, want 0: the refunded event was credited again (charges %s, credits %s)",
			b.Balance, b.Currency, b.Charges, b.Credits)
	}
	var res ledger.RerateResult
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2026-02-01"}`, http.StatusOK, &res)
	if res.Refunded != 1 || res.Adjusted != 0 {
		t.Errorf("re-rating again: %+v, want the refunded event counted as refunded and left alone", res)
	}
}

// TestNoRequestFeeForAnUnansweredRequest: docs/billing.md says "An upstream
// that refused or failed before answering bills nothing", and the README
// table says an upstream 4xx/5xx before streaming is recorded as
// upstream_error with "nothing billed": a model's request_fee is not
// charged on such an event either. (Found by a review: it was.)
func TestNoRequestFeeForAnUnansweredRequest(t *testing.T) {
	s := newServer(t)
	cust, key, _ := s.customer(`{"name":"acme"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"1","request_fee":"0.01","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	e := event(cust, key, "m", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{})
	e.Status, e.HTTPStatus, e.Error, e.FinishReason = usage.StatusUpstreamError, 429, "upstream status 429", ""
	e.UsageSource = usage.SourceEstimated
	s.write(e)
	var ev ledger.RatedEvent
	s.adm("GET", "/admin/v1/events/"+e.ID, "", http.StatusOK, &ev)
	if dec(t, ev.Cost).Sign() != 0 {
		t.Errorf("an upstream 429 before any byte (status %s, no tokens) is charged %s %s; docs say nothing is billed", ev.Status, ev.Cost, ev.Currency)
	}
}

// TestTimesPastYear9998AreRefused: a statement for 9999-12 and a
// reconciliation whose range ends in the last hour of 9999 would end
// ("to": the next month, the next whole hour) in year 10000, which JSON
// cannot hold: they are refused with 400. (Found by a review: the answer
// was a 200 with an empty body.)
func TestTimesPastYear9998AreRefused(t *testing.T) {
	s := newServer(t)
	cust, _, secret := s.customer(`{"name":"acme"}`)
	for _, c := range []struct{ base, path, auth string }{
		{s.admin, "/admin/v1/customers/" + cust + "/statements/9999-12", adminToken},
		{s.llm, "/v1/statements/9999-12", secret},
		{s.admin, "/admin/v1/reconciliation?from=2026-01-01&to=9999-12-31T23:30:00Z", adminToken},
	} {
		status, body, err := send("GET", c.base+c.path, c.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusBadRequest || !json.Valid(body) {
			t.Errorf("GET %s = %d %q; want 400 with a JSON error", c.path, status, body)
		}
	}
}

// TestExportRefusesYearZero: from=0000-01-01, a year Postgres does not
// have, is the client's error: 400 naming the parameter. (Found by a
// review: the export answered 500.)
func TestExportRefusesYearZero(t *testing.T) {
	s := newServer(t)
	status, body, err := send("GET", s.admin+"/admin/v1/export?from=0000-01-01&to=2026-01-01", adminToken, "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("from")) {
		t.Errorf("GET /admin/v1/export?from=0000-01-01&to=2026-01-01 = %d %s; want 400 naming from", status, bytes.TrimSpace(body))
	}
}
