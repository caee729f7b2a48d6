package api_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEntriesReconcileWithBalance: after credits, adjustments, usage, a
// refund, a reversal and a re-rating (which both changes charges and
// prices an unpriced event, and leaves the refunded event alone), the
// listed entries, rerate entries included,
// add up to the balance with the events' charges as first rated, and the
// other entries with the usage's cost:
//
//	balance = Σ entries − Σ charge(events) = Σ non-rerate entries − Σ cost(usage)
func TestEntriesReconcileWithBalance(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, _ := s.customer(`{"name":"acme"}`)
	base := "/admin/v1/customers/" + cust
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"2","output":"8","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)

	s.adm("POST", base+"/credits", `{"amount":"100","idempotency_key":"topup-1"}`, http.StatusCreated, nil)
	s.adm("POST", base+"/adjustments", `{"amount":"-2.5","memo":"fee"}`, http.StatusCreated, nil)
	var goodwill ledger.Entry
	s.adm("POST", base+"/adjustments", `{"amount":"1.25","memo":"goodwill"}`, http.StatusCreated, &goodwill)
	s.adm("POST", "/admin/v1/entries/"+itoa(goodwill.ID)+"/reverse", `{"memo":"not owed"}`, http.StatusCreated, nil)

	// 1000 × 2 + 500 × 8 = 6000 µ = 0.006 each at the book price.
	u := usage.Tokens{PromptTokens: 1000, CompletionTokens: 500}
	events := []usage.Event{
		event(cust, key, "m", jan.Add(time.Hour), u),
		event(cust, key, "m", jan.Add(2*time.Hour), u),
		event(cust, key, "m", jan.Add(3*time.Hour), u),
		event(cust, key, "new-model", jan.Add(4*time.Hour), u), // no price yet: unpriced
	}
	s.write(events...)
	s.adm("POST", "/admin/v1/events/"+events[0].ID+"/refund", `{"memo":"outage"}`, http.StatusCreated, nil)

	// Re-rating: a 10% discount on m (each m event 0.006 → 0.0054) and a
	// price for new-model (1000 × 3 + 500 × 15 = 10500 µ = 0.0105).
	s.adm("POST", base+"/overrides", `{"model":"m","discount_percent":"10","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/prices", `{"model":"new-model","currency":"USD","input":"3","output":"15","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	var rr ledger.RerateResult
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2026-02-01"}`, http.StatusOK, &rr)
	if rr.Adjusted != 3 || rr.Priced != 1 || rr.Refunded != 1 {
		t.Fatalf("rerate = %+v, want 3 adjusted, 1 priced, 1 refunded (left alone)", rr)
	}

	var entries struct{ Data []ledger.Entry }
	s.adm("GET", base+"/entries", "", http.StatusOK, &entries)
	sumAll, sumNotRerate := decimal.Zero, decimal.Zero
	kinds := map[string]int{}
	for _, e := range entries.Data {
		kinds[e.Kind]++
		if e.Currency != "USD" {
			t.Fatalf("entry %+v: not in the customer's currency", e)
		}
		sumAll = sumAll.Add(dec(t, e.Amount))
		if e.Kind != ledger.KindRerate {
			sumNotRerate = sumNotRerate.Add(dec(t, e.Amount))
		}
	}
	if kinds[ledger.KindCredit] != 1 || kinds[ledger.KindAdjustment] != 2 || kinds[ledger.KindRefund] != 2 || kinds[ledger.KindRerate] != 3 {
		t.Fatalf("entries by kind = %v, want 1 credit, 2 adjustments, 2 refunds, 3 rerate", kinds)
	}
	var window struct{ Data []ledger.Entry }
	s.adm("GET", base+"/entries?from=2026-01-01&to=2026-02-01", "", http.StatusOK, &window)
	if n := countKind(window.Data, ledger.KindRerate); n != 3 {
		t.Errorf("entries of January: %d rerate entries, want 3 (effective at their events' times)", n)
	}

	charges, costs := decimal.Zero, decimal.Zero
	for _, e := range events {
		var ev ledger.RatedEvent
		s.adm("GET", "/admin/v1/events/"+e.ID, "", http.StatusOK, &ev)
		charges, costs = charges.Add(dec(t, ev.Charge)), costs.Add(dec(t, ev.Cost))
	}
	var page ledger.UsagePage
	s.adm("GET", "/admin/v1/usage?customer_id="+cust, "", http.StatusOK, &page)
	usageCost := decimal.Zero
	for _, r := range page.Data {
		usageCost = usageCost.Add(dec(t, r.Cost))
	}
	var b ledger.Balance
	s.adm("GET", base+"/balance", "", http.StatusOK, &b)
	balance := dec(t, b.Balance)

	// credit 100 − 2.5 + 1.25 − 1.25 (reversed) + refund 0.006
	// + rerate (2 × 0.0006 − 0.0105) − charges as first rated (3 × 0.006).
	if !balance.Equal(dec(t, "97.4787")) {
		t.Errorf("balance = %s, want 97.4787", balance)
	}
	if got := sumAll.Sub(charges); !got.Equal(balance) {
		t.Errorf("Σ entries %s − Σ charges as rated %s = %s, balance %s", sumAll, charges, got, balance)
	}
	if got := sumNotRerate.Sub(usageCost); !got.Equal(balance) {
		t.Errorf("Σ non-rerate entries %s − Σ usage cost %s = %s, balance %s", sumNotRerate, usageCost, got, balance)
	}
	if !costs.Equal(usageCost) || !usageCost.Equal(dec(t, "0.0273")) {
		t.Errorf("Σ events' cost %s, usage cost %s: want both 0.0273 (the refunded 0.006 + 2 × 0.0054 + 0.0105)", costs, usageCost)
	}
}

// TestListsOfUnknownCustomer: listing the entries, keys or overrides of a
// customer that does not exist is 404, as its balance is, not an empty list.
func TestListsOfUnknownCustomer(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, list := range []string{"entries", "keys", "overrides"} {
		s.adm("GET", "/admin/v1/customers/00000000-0000-7000-8000-000000000000/"+list, "", http.StatusNotFound, nil)
	}
}

func countKind(es []ledger.Entry, kind string) int {
	n := 0
	for _, e := range es {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
