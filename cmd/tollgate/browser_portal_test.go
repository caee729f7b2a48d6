package main

import (
	"context"
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
	if got, want := text(t, tab, "#credits"), bal.Credits+" "+bal.Currency; got != want {
		t.Errorf("portal credits = %q, the API's = %q", got, want)
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
	requestLogFitsAPhone(t, tab, s.gateway+"/portal/requests", len(reqs.Data))
	// So do the usage tables of the first page (a browser review: their
	// Cost column was off the screen at a phone's width).
	do(t, tab, chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2)))
	page(t, tab, s.gateway+"/portal/")
	wider := run(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#usage-by-model, #usage-by-day')]
		.filter(w => w.scrollWidth > w.clientWidth).map(w => w.id + ': ' + w.scrollWidth + ' px in ' + w.clientWidth)`))
	do(t, tab, chromedp.EmulateReset())
	if len(wider) != 0 {
		t.Errorf("at 375 px the portal's usage tables scroll sideways: %q", wider)
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
	if loc := run(t, tab, chromedp.Location()); !strings.HasSuffix(loc, "/portal/signin?signed_out=1") {
		t.Errorf("after signing out the browser is at %s", loc)
	}
}

// requestLogFitsAPhone checks the portal's request log (at url, rows
// requests) at a phone's width, 375 CSS px: the page and the table fit the
// screen, nothing in the table scrolls sideways and every cell (the tokens
// and the cost among them) is within the screen. Its nine columns were a
// table wider than the screen, the tokens and the cost scrolled off to the
// side.
func requestLogFitsAPhone(t *testing.T, tab context.Context, url string, rows int) {
	t.Helper()
	do(t, tab, chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2)))
	defer do(t, tab, chromedp.EmulateReset())
	page(t, tab, url)
	type fit struct {
		Viewport, Page, Table, ScrollWidth, ClientWidth float64
		Rows                                            int
		Outside                                         []string
		Labels                                          []string
	}
	f := run(t, tab, chromedp.Evaluate[fit](`(() => {
		const vw = document.documentElement.clientWidth, table = document.querySelector('#requests'), wrap = table.closest('.scroll');
		const cells = [...table.querySelectorAll('tbody td')];
		return {viewport: vw, page: document.documentElement.scrollWidth, table: table.getBoundingClientRect().width,
			scrollWidth: wrap.scrollWidth, clientWidth: wrap.clientWidth, rows: table.querySelectorAll('tbody tr').length,
			outside: cells.filter(td => { const r = td.getBoundingClientRect(); return r.left < 0 || r.right > vw + 0.5; })
				.map(td => (td.dataset.label || '?') + ': ' + td.textContent),
			labels: cells.slice(0, 9).map(td => getComputedStyle(td, '::before').content)};
	})()`))
	if f.Viewport != 375 {
		t.Fatalf("the phone's viewport is %v CSS px wide; want 375", f.Viewport)
	}
	if f.Rows != rows || f.Page > f.Viewport || f.Table > f.Viewport || f.ScrollWidth > f.ClientWidth || len(f.Outside) != 0 {
		t.Errorf("the request log at 375 px: %d rows (want %d), page %v px wide, table %v px, its box scrolls %v px in %v; cells off the screen: %q",
			f.Rows, rows, f.Page, f.Table, f.ScrollWidth, f.ClientWidth, f.Outside)
	}
	// Stacked, each value says what it is.
	if want := []string{"Time (UTC)", "Model", "Status", "Prompt", "Cached", "Completion", "Reasoning", "Cost", "Request id"}; len(f.Labels) != len(want) ||
		!strings.Contains(strings.Join(f.Labels, "|"), strings.Join(want, `"|"`)) {
		t.Errorf("the request log's cells at 375 px are labelled %q; want %q", f.Labels, want)
	}
}
