package main

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPortal drives the customers' portal in headless chromium
// against the whole stack, as customer A while customer B also has usage:
// a wrong key cannot sign in; every page shows the figures the customer
// API returns A; B's requests, models and name never appear; the statement
// downloaded is the API's CSV.
func TestBrowserPortal(t *testing.T) {
	tab := browserTab(t)
	s := newStack(t, nil)
	var b struct {
		ID string `json:"id"`
	}
	s.adminDo("POST", "/admin/v1/customers", `{"name":"bravo-corp"}`, http.StatusCreated, &b)
	var bk struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+b.ID+"/keys", `{"name":"b"}`, http.StatusCreated, &bk)
	s.refreshKeys()
	var idsA, idsB []string
	for _, m := range []string{"sim-pro", "sim-small"} {
		_, id := chat(t, s.gateway, s.secret, m)
		s.event(id)
		idsA = append(idsA, id)
	}
	for range 2 {
		_, id := chat(t, s.gateway, bk.Key, "sim-pro")
		s.event(id)
		idsB = append(idsB, id)
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/credits", `{"amount":"10"}`, http.StatusCreated, nil)

	for _, wrong := range []string{"tg-not-a-key", bk.Key + "x"} {
		if loc := signInBrowser(t, tab, s.gateway, "portal", "key", wrong); !strings.HasSuffix(loc, "/portal/signin") {
			t.Fatalf("after a wrong key the browser is at %s", loc)
		}
		if msg := text(t, tab, "p.error"); !strings.Contains(msg, "unknown, revoked or expired") {
			t.Errorf("wrong key message = %q", msg)
		}
	}
	if loc := signInBrowser(t, tab, s.gateway, "portal", "key", s.secret); !strings.HasSuffix(loc, "/portal/") {
		t.Fatalf("after signing in the browser is at %s", loc)
	}

	// Usage: balance, month spend, requests and rows are the customer API's.
	var bal struct{ Balance, Currency, Credits string }
	s.customerDo("GET", "/v1/balance", &bal)
	now := time.Now().UTC()
	month := url.QueryEscape(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339))
	var byModel, byDay usageRows
	s.customerDo("GET", "/v1/usage?group_by=model&limit=1000&from="+month, &byModel)
	s.customerDo("GET", "/v1/usage?group_by=day&limit=1000&from="+month, &byDay)
	var all strings.Builder
	all.WriteString(page(t, tab, s.gateway+"/portal/"))
	if got, want := text(t, tab, "#balance"), bal.Balance+" "+bal.Currency; got != want {
		t.Errorf("portal balance = %q, the API's = %q", got, want)
	}
	if got := text(t, tab, "#credits"); got != bal.Credits {
		t.Errorf("portal credits = %q, the API's = %q", got, bal.Credits)
	}
	if got, want := text(t, tab, "#spend-month"), sumCosts(byModel.costs()); got != want {
		t.Errorf("portal spend this month = %q, the API's = %q", got, want)
	}
	var requests int64
	for _, r := range byModel.Data {
		requests += r.Requests
		if row := text(t, tab, "#usage-by-model"); !strings.Contains(row, r.Model+" "+strconv.FormatInt(r.Requests, 10)) || !strings.Contains(row, r.Cost+" "+r.Currency) {
			t.Errorf("portal usage by model %q lacks %s: %d requests at %s", row, r.Model, r.Requests, r.Cost)
		}
	}
	if got := text(t, tab, "#requests-month"); got != strconv.FormatInt(requests, 10) {
		t.Errorf("portal requests = %q, the API's = %d", got, requests)
	}
	for _, r := range byDay.Data {
		if row := text(t, tab, "#usage-by-day"); !strings.Contains(row, r.Group) || !strings.Contains(row, r.Cost) {
			t.Errorf("portal usage by day %q lacks %s at %s", row, r.Group, r.Cost)
		}
	}

	// Requests: A's, with their costs; statements: the API's CSV.
	var reqs struct {
		Data []struct{ ID, Cost, Currency string } `json:"data"`
	}
	s.customerDo("GET", "/v1/requests?limit=50", &reqs)
	all.WriteString(page(t, tab, s.gateway+"/portal/requests"))
	for _, r := range reqs.Data {
		if row := text(t, tab, "#requests"); !strings.Contains(row, r.ID) || !strings.Contains(row, r.Cost+" "+r.Currency) {
			t.Errorf("portal requests lack %s at %s", r.ID, r.Cost)
		}
	}
	for _, id := range idsA {
		if !strings.Contains(all.String(), id) {
			t.Errorf("A's request %s is not on A's portal", id)
		}
	}
	all.WriteString(page(t, tab, s.gateway+"/portal/statements"))
	period := now.Format("2006-01")
	want := httpGet(t, s.gateway+"/v1/statements/"+period+"?format=csv", s.secret)
	if got := download(t, tab, `#statements a[href$="`+period+`.csv"]`); string(got) != string(want) {
		t.Errorf("downloaded statement:\n%s\nthe API's:\n%s", got, want)
	}

	// Nothing of B's, nor the key itself, anywhere.
	for _, bad := range append(idsB, "bravo-corp", b.ID, bk.Key, s.secret) {
		if strings.Contains(all.String(), bad) {
			t.Errorf("A's portal shows %q", bad)
		}
	}
	navigate(t, tab, chromedp.Click(chromedp.CSS(".signout button")))
	if loc := run(t, tab, chromedp.Location()); !strings.HasSuffix(loc, "/portal/signin") {
		t.Errorf("after signing out the browser is at %s", loc)
	}
}
