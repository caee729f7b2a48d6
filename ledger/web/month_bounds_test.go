package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestThisMonthEndsAtTheMonthsEnd: "this month" on the portal and the
// console is the month its statement covers, [month start, next month):
// an event stamped past the month's end (a gateway clock ahead, at the
// month's end) is next month's, and was counted in this month's spend
// (a finance review: the portal showed 2 where the statement said 1).
func TestThisMonthEndsAtTheMonthsEnd(t *testing.T) {
	g := newRig(t)
	c, secret, _ := g.customer("clocks", "none", 0)
	g.priced("m", "USD")
	g.spend(c, "m", 2_000_000) // 2 USD now
	ks, err := g.api.Keys(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 2, 0, 0, time.UTC)
	ev := usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: next,
		CustomerID: c.ID, KeyID: ks[0].ID, Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 5_000_000}}
	if _, err := g.store.WriteEvents(context.Background(), []usage.Event{ev}); err != nil {
		t.Fatal(err)
	}
	st, err := g.api.Statement(context.Background(), c.ID, now.Format("2006-01"))
	if err != nil || len(st.Sections) != 1 || st.Sections[0].ExactTotal != "2" {
		t.Fatalf("this month's statement: %+v, %v; want 2 USD", st, err)
	}
	p := g.browser()
	g.signIn(p, "portal", "key", secret)
	console := g.browser()
	g.signIn(console, "console", "token", adminToken)
	for _, page := range []struct {
		client     *http.Client
		path, part string
	}{{p, "/portal/", `id="spend-month"`}, {console, "/console/?fresh=1", `id="spend-month"`}, {console, "/console/customers/" + c.ID, `id="usage-by-model"`}} {
		status, body, _ := g.do(page.client, "GET", page.path, nil)
		if status != http.StatusOK {
			t.Fatalf("%s = %d", page.path, status)
		}
		_, part, _ := strings.Cut(body, page.part)
		part, _, _ = strings.Cut(part, "</div>")
		if !strings.Contains(part, ">2 USD") || strings.Contains(part, "7 USD") {
			t.Errorf("%s: this month's spend is not 2 USD alone: %s", page.path, part)
		}
	}
}
