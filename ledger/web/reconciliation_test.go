package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleReconciliationShowsTheRangeChecked: the API widens a range to
// whole hours, but the page said "The ledger adds up over this range" of
// the range asked (19:05 to 19:30); and a range it could not check (not a
// time, or from after to) still said "Checked at … UTC".
func TestConsoleReconciliationShowsTheRangeChecked(t *testing.T) {
	g := newRig(t)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	h := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	from, to := h.Add(5*time.Minute).Format("2006-01-02T15:04"), h.Add(30*time.Minute).Format("2006-01-02T15:04")
	status, body, _ := g.do(c, "GET", "/console/reconciliation?from="+from+"&to="+to, nil)
	if status != http.StatusOK {
		t.Fatalf("reconciliation = %d", status)
	}
	checked := h.Format("2006-01-02 15:04") + " to " + h.Add(time.Hour).Format("2006-01-02 15:04") + " UTC"
	for _, want := range []string{"Range checked: " + checked, "(" + from + " to " + to + ") widened to whole hours",
		"The ledger adds up from " + checked} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "over this range") {
		t.Errorf("the page speaks of the range asked as checked:\n%s", body)
	}
	for _, q := range []string{"from=garbage&to=" + to, "from=" + to + "&to=" + from} {
		status, body, _ := g.do(c, "GET", "/console/reconciliation?"+q, nil)
		if status != http.StatusBadRequest || !strings.Contains(body, `class="error"`) {
			t.Errorf("?%s = %d, want 400 with the error (TestConsoleBadQueryAnswers4xx)", q, status)
		}
		if strings.Contains(body, "Checked at") || strings.Contains(body, `id="verdict"`) || !strings.Contains(body, "Nothing was checked") {
			t.Errorf("?%s: the page says it checked:\n%s", q, body)
		}
	}
}

// TestConsoleReconciliationShowsRowsRecordedLate (a finance review of time
// boundaries): a payment dated back into a month long over moves its
// statement; the page says how many of the range's events and entries
// were recorded after their month, and when its last row was recorded,
// as the API does.
func TestConsoleReconciliationShowsRowsRecordedLate(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("late-co", "m1", 0)
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -2, 0)
	if _, err := g.api.AddEntry(context.Background(), cust.ID, "credit",
		ledger.EntryInput{Amount: "5", EffectiveAt: month.AddDate(0, 0, 3)}); err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	status, body, _ := g.do(c, "GET", "/console/reconciliation?from="+month.Format("2006-01-02T15:04")+
		"&to="+month.AddDate(0, 1, 0).Format("2006-01-02T15:04"), nil)
	if status != http.StatusOK {
		t.Fatalf("GET /console/reconciliation = %d:\n%s", status, body)
	}
	for _, want := range []string{
		`<th scope="row">Events recorded after their month</th><td class="n">0</td>`,
		`<th scope="row">Entries recorded after their month</th><td class="n">1</td>`,
		`<th scope="row">Last recorded (UTC)</th><td class="n">` + now.Format("2006-01-02"),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the reconciliation page lacks %q:\n%s", want, body)
		}
	}
}
