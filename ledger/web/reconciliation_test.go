package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
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
		if status != http.StatusOK || !strings.Contains(body, `class="error"`) {
			t.Errorf("?%s = %d, want 200 with the error", q, status)
		}
		if strings.Contains(body, "Checked at") || strings.Contains(body, `id="verdict"`) || !strings.Contains(body, "Nothing was checked") {
			t.Errorf("?%s: the page says it checked:\n%s", q, body)
		}
	}
}
