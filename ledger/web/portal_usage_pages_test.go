package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/web"
)

// TestPortalUsageFollowsTheCursor: the usage page sums the month over
// every page of the customer API's usage, not the first: it asked for
// /v1/usage?group_by=model&limit=1000 once, so a customer with more than
// 1,000 model and currency rows saw "Spend this month" undercounted. Here
// a page is 3 rows and the customer has 8 models.
func TestPortalUsageFollowsTheCursor(t *testing.T) {
	g := newRigWith(t, func(p *web.Portal) { web.SetUsagePageLimit(p, 3) })
	c, secret, _ := g.customer("many-models", "none", 0)
	for i := 1; i <= 8; i++ {
		m := fmt.Sprintf("model-%d", i)
		g.priced(m, "USD")
		g.spend(c, m, int64(i)*1_000_000) // i USD
	}
	p := g.browser()
	g.signIn(p, "portal", "key", secret)
	status, body, _ := g.do(p, "GET", "/portal/", nil)
	if status != http.StatusOK {
		t.Fatalf("portal = %d %s", status, body)
	}
	if !strings.Contains(body, `id="spend-month">36 USD<`) || !strings.Contains(body, `id="requests-month">8<`) {
		i := strings.Index(body, `id="spend-month"`)
		t.Errorf("spend this month: %.80s; want 36 USD over 8 requests, the sum of every model", body[max(i, 0):])
	}
	for i := 1; i <= 8; i++ {
		if !strings.Contains(body, fmt.Sprintf(">model-%d<", i)) {
			t.Errorf("model-%d is not in the by-model table", i)
		}
	}
	day := time.Now().UTC().Format("2006-01-02")
	if !strings.Contains(body, day+" model-8: 8 USD") || !strings.Contains(body, day+" other: 3 USD") {
		t.Error("the chart does not stack every model's cost")
	}
}
