package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestPortalSaysWhatIsNotPricedYet: usage no price rated yet (stored at
// cost 0 until a price is added and the period re-rated, when it is
// charged) is shown as not priced yet, not as costing 0: a customer
// review saw a model's two unpriced requests in the portal as "0" beside
// the priced models' costs, in the request log as "0", and the
// statement's page say "Nothing this month yet", for usage a re-rating
// would bill the next day.
func TestPortalSaysWhatIsNotPricedYet(t *testing.T) {
	g := newRig(t)
	c, secret, ids := g.customer("unpriced-usage", "free-m", 2)
	g.priced("priced-m", "USD")
	g.spend(c, "priced-m", 2_000_000) // 2 USD
	p := g.browser()
	g.signIn(p, "portal", "key", secret)

	cell := func(body, table, model string) string {
		i := strings.Index(body, `id="`+table+`"`)
		if i < 0 {
			t.Fatalf("no %s table", table)
		}
		row := regexp.MustCompile(`<tr><td[^>]*>` + regexp.QuoteMeta(model) + `</td>.*?</tr>`).FindString(body[i:])
		return regexp.MustCompile(`<[^>]*>`).ReplaceAllString(row, " ")
	}
	status, body, _ := g.do(p, "GET", "/portal/", nil)
	if status != http.StatusOK {
		t.Fatalf("portal = %d %s", status, body)
	}
	if row := cell(body, "usage-by-model", "free-m"); !strings.Contains(row, "not priced yet") {
		t.Errorf("usage by model, free-m: %q; want its cost shown as not priced yet", strings.Join(strings.Fields(row), " "))
	}
	if row := cell(body, "usage-by-model", "priced-m"); !strings.Contains(row, "2 USD") || strings.Contains(row, "not priced") {
		t.Errorf("usage by model, priced-m: %q; want 2 USD", strings.Join(strings.Fields(row), " "))
	}
	// A day's row holds both: its priced cost and its requests not priced.
	if day := body[strings.Index(body, `id="usage-by-day"`):]; !strings.Contains(day, "not priced yet") {
		t.Errorf("usage by day: %.400q; want the requests not priced yet", day)
	}

	status, body, _ = g.do(p, "GET", "/portal/requests", nil)
	if status != http.StatusOK {
		t.Fatalf("requests = %d %s", status, body)
	}
	for _, id := range ids {
		i := strings.Index(body, id)
		j := strings.LastIndex(body[:max(i, 0)], "<tr>")
		if i < 0 || j < 0 || !strings.Contains(body[j:i], "not priced yet") {
			t.Errorf("request %s is not shown as not priced yet", id)
		}
	}

	status, body, _ = g.do(p, "GET", "/portal/statements", nil)
	if status != http.StatusOK {
		t.Fatalf("statements = %d %s", status, body)
	}
	text := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body, " ")), " ")
	if !strings.Contains(text, "free-m") || !strings.Contains(text, "not priced yet") {
		t.Errorf("statements page: %q; want free-m's 2 requests listed as not priced yet", text)
	}
}
