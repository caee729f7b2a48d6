package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPagesRefuseQueryStringsThatDoNotParse: a console or portal page
// whose query string does not parse whole (a bad %-escape, more than
// 10,000 parameters) is refused 400, not shown for what was left of the
// query (the first page of a list for ?cursor=%%%).
func TestPagesRefuseQueryStringsThatDoNotParse(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("q", "model-q", 1)
	console, portal := g.browser(), g.browser()
	g.signIn(console, "console", "token", adminToken)
	g.signIn(portal, "portal", "key", key)
	pad := strings.Repeat("&pad=1", 10000)
	for _, c := range []struct {
		client *http.Client
		path   string
	}{
		{console, "/console/customers?q=%"}, {console, "/console/customers?page=2" + pad}, {console, "/console/keys?customer=%%%"},
		{portal, "/portal/requests?cursor=%%%"}, {portal, "/portal/requests?cursor=x" + pad}, {portal, "/portal/?x=%"},
	} {
		status, body, _ := g.do(c.client, "GET", c.path, nil)
		if status != http.StatusBadRequest || !strings.Contains(body, "query") {
			t.Errorf("GET %.60s = %d %.200s; want 400 naming the query", c.path, status, body)
		}
	}
	if status, body, _ := g.do(portal, "GET", "/portal/requests?cursor=", nil); status != http.StatusOK {
		t.Errorf("GET /portal/requests?cursor= = %d %.200s; want 200", status, body)
	}
}
