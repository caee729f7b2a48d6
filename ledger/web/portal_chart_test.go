package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPortalChartStacksOtherModels: the portal's cost-per-day chart
// stacked the 6 costliest models and dropped the rest, so its bars summed
// less than the by-day table. The rest are stacked as "other", as on the
// console's customer page.
func TestPortalChartStacksOtherModels(t *testing.T) {
	g := newRig(t)
	c, secret, _ := g.customer("many-models", "none", 0)
	for i := 1; i <= 8; i++ {
		m := fmt.Sprintf("model-%d", i)
		g.priced(m, "USD")
		g.spend(c, m, int64(i)*1_000_000) // i USD
	}
	day := time.Now().UTC().Format("2006-01-02")
	p := g.browser()
	g.signIn(p, "portal", "key", secret)
	status, body, _ := g.do(p, "GET", "/portal/", nil)
	if status != http.StatusOK {
		t.Fatalf("portal = %d", status)
	}
	for _, want := range []string{day + " model-8: 8 USD", day + " model-3: 3 USD", day + " other: 3 USD", "<li>", "other</li>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the portal's chart lacks %q", want)
		}
	}
	if strings.Contains(body, day+" model-2:") {
		t.Error("the portal's chart stacks a 7th model of its own")
	}
}
