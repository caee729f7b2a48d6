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
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

type usageRows struct {
	Data []struct {
		Group, Model, Cost, Currency, CustomerName string
		Requests                                   int64
	} `json:"data"`
}

func (u usageRows) costs() []struct{ Cost, Currency string } {
	var out []struct{ Cost, Currency string }
	for _, r := range u.Data {
		out = append(out, struct{ Cost, Currency string }{r.Cost, r.Currency})
	}
	return out
}

// TestBrowserConsole drives the operators' console in headless chromium
// against the whole stack: a wrong token cannot sign in; every page shows
// the figures the admin API returns; a key issued in the console works on
// the gateway, and once revoked in the console the gateway refuses it; a
// statement downloaded from the console is the API's CSV; a dead letter
// is listed and replayed.
func TestBrowserConsole(t *testing.T) {
	tab := browserTab(t)
	s := newStack(t, nil)
	for _, m := range []string{"sim-pro", "sim-small", "sim-pro"} {
		if status, id := chat(t, s.gateway, s.secret, m); status != http.StatusOK {
			t.Fatalf("chat %s = %d", m, status)
		} else {
			s.event(id)
		}
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/credits", `{"amount":"25","memo":"browser credit"}`, http.StatusCreated, nil)
	cl := api.NewClient(s.admin, testAdminToken, nil)
	ctx := context.Background()
	// One poison message, which the meter sets aside as a dead letter.
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "tollgate.usage.v1", []byte(`{"v":7,"id":"browser-poison"}`)); err != nil {
		t.Fatal(err)
	}
	var letters []usage.DeadLetter
	for range 200 {
		if letters, err = cl.DeadLetters(ctx, 100); err == nil && len(letters) == 1 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if len(letters) != 1 {
		t.Fatalf("dead letters = %v %v, want the poison", letters, err)
	}

	// A wrong token stays on the sign-in page with an error.
	if loc := signInBrowser(t, tab, s.admin, "console", "token", "not-the-token"); !strings.HasSuffix(loc, "/console/signin") {
		t.Fatalf("after a wrong token the browser is at %s", loc)
	}
	if msg := text(t, tab, "p.error"); !strings.Contains(msg, "not the admin token") {
		t.Errorf("wrong token message = %q", msg)
	}
	if loc := signInBrowser(t, tab, s.admin, "console", "token", testAdminToken); !strings.HasSuffix(loc, "/console/") {
		t.Fatalf("after signing in the browser is at %s", loc)
	}
	// The first overview answers at once and reloads itself until its
	// figures are computed (in the background).
	do(t, tab, chromedp.WaitVisible(chromedp.CSS("#spend-month")))

	// Overview: this month's and today's figures are the usage API's.
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	var byModel, byCustomer usageRows
	getJSON(t, s.admin+"/admin/v1/usage?group_by=model&limit=1000&from="+url.QueryEscape(month), testAdminToken, &byModel)
	getJSON(t, s.admin+"/admin/v1/usage?group_by=customer&limit=1000&from="+url.QueryEscape(month), testAdminToken, &byCustomer)
	html := page(t, tab, s.admin+"/console/?fresh=1")
	if strings.Contains(html, testAdminToken) {
		t.Errorf("the overview holds the admin token")
	}
	if got, want := text(t, tab, "#spend-month"), sumCosts(byModel.costs()); got != want {
		t.Errorf("overview spend this month = %q, the API's = %q", got, want)
	}
	var requests int64
	for _, r := range byModel.Data {
		requests += r.Requests
		if !strings.Contains(text(t, tab, "#top-models"), r.Model) || !strings.Contains(text(t, tab, "#top-models"), r.Cost) {
			t.Errorf("top models lack %s at %s", r.Model, r.Cost)
		}
	}
	if got := text(t, tab, "#requests-month"); got != strconv.FormatInt(requests, 10) {
		t.Errorf("overview requests this month = %q, the API's = %d", got, requests)
	}
	for _, r := range byCustomer.Data {
		if row := text(t, tab, "#top-customers"); !strings.Contains(row, r.CustomerName) || !strings.Contains(row, r.Cost) {
			t.Errorf("top customers %q lack %s at %s", row, r.CustomerName, r.Cost)
		}
	}
	if got := text(t, tab, "#dead-letters"); got != strconv.Itoa(len(letters)) {
		t.Errorf("dead letters = %q, the API lists %d", got, len(letters))
	}

	// Customers and the customer's page: balances and usage are the API's.
	bal, err := cl.Balance(ctx, s.customerID)
	if err != nil {
		t.Fatal(err)
	}
	page(t, tab, s.admin+"/console/customers?q=acm")
	if row := text(t, tab, "#customers"); !strings.Contains(row, "acme") || !strings.Contains(row, bal.Balance) {
		t.Errorf("customers list %q lacks acme's balance %s", row, bal.Balance)
	}
	page(t, tab, s.admin+"/console/customers/"+s.customerID)
	if got, want := text(t, tab, "#balance"), bal.Balance+" "+bal.Currency; got != want {
		t.Errorf("customer balance = %q, the API's = %q", got, want)
	}
	var custModels usageRows
	getJSON(t, s.admin+"/admin/v1/usage?group_by=model&limit=1000&customer_id="+s.customerID+"&from="+url.QueryEscape(month), testAdminToken, &custModels)
	for _, r := range custModels.Data {
		if row := text(t, tab, "#usage-by-model"); !strings.Contains(row, r.Model+" "+strconv.FormatInt(r.Requests, 10)) || !strings.Contains(row, r.Cost+" "+r.Currency) {
			t.Errorf("customer usage %q lacks %s: %d requests, %s", row, r.Model, r.Requests, r.Cost)
		}
	}
	if !strings.Contains(text(t, tab, "#entries"), "browser credit") {
		t.Errorf("the customer's entries lack the credit")
	}
	period := now.Format("2006-01")
	var want strings.Builder
	if _, err := cl.WriteStatement(ctx, s.customerID, period, "csv", &want); err != nil {
		t.Fatal(err)
	}
	if got := download(t, tab, `#statements a[href$="`+period+`.csv"]`); string(got) != want.String() {
		t.Errorf("downloaded statement:\n%s\nthe API's:\n%s", got, want.String())
	}

	// Price book: the versions in force are the API's.
	prices, err := cl.Prices(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	page(t, tab, s.admin+"/console/prices")
	for _, p := range prices {
		if row := text(t, tab, "#current"); !strings.Contains(row, p.Model) || !strings.Contains(row, p.Input+" "+p.Currency) {
			t.Errorf("price book %q lacks %s at %s", row, p.Model, p.Input)
		}
	}

	// Reconciliation over the page's own range is the API's.
	page(t, tab, s.admin+"/console/reconciliation?fresh=1")
	from, to := run(t, tab, chromedp.Value(chromedp.CSS("#from"))), run(t, tab, chromedp.Value(chromedp.CSS("#to")))
	f, _ := time.Parse("2006-01-02T15:04", from)
	e, _ := time.Parse("2006-01-02T15:04", to)
	rec, err := cl.Reconcile(ctx, f, e)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, tab, "#reconciliation tr:first-child td"); got != strconv.FormatInt(rec.Events, 10) || !rec.Clean || !strings.Contains(text(t, tab, "#verdict"), "adds up") {
		t.Errorf("reconciliation events = %q (clean shown: %q), the API's = %d clean %v", got, text(t, tab, "#verdict"), rec.Events, rec.Clean)
	}
	// Dead letters: the API's, and one replayed from the page.
	page(t, tab, s.admin+"/console/dlq")
	seq := strconv.FormatUint(letters[0].Seq, 10)
	if row := text(t, tab, "#dlq"); !strings.Contains(row, seq) || !strings.Contains(row, letters[0].Reason) {
		t.Errorf("dlq page %q lacks seq %s: %s", row, seq, letters[0].Reason)
	}
	navigate(t, tab, chromedp.Click(chromedp.CSS(`button[aria-label="Replay dead letter `+seq+`"]`)))
	if n := text(t, tab, "p.notice"); n != "1 dead letter replayed." {
		t.Errorf("after replaying, the notice is %q", n)
	}

	// A key issued in the console works on the gateway until it is revoked there.
	page(t, tab, s.admin+"/console/keys?customer="+s.customerID)
	do(t, tab, chromedp.SendKeys(chromedp.CSS("#name"), "from-the-console"))
	navigate(t, tab, chromedp.Click(chromedp.CSS("#issue button")))
	secret := text(t, tab, "#secret")
	if !strings.HasPrefix(secret, "tg-") {
		t.Fatalf("issued secret = %q", secret)
	}
	if status, _ := chat(t, s.gateway, secret, "sim-small"); status != http.StatusOK {
		t.Fatalf("the gateway answers the console's new key with %d", status)
	}
	keys, err := cl.Keys(ctx, s.customerID)
	if err != nil {
		t.Fatal(err)
	}
	var issued ledger.Key
	for _, k := range keys {
		if k.Name == "from-the-console" {
			issued = k
		}
	}
	html = page(t, tab, s.admin+"/console/keys?customer="+s.customerID)
	if strings.Contains(html, secret) {
		t.Errorf("the keys page shows the secret again")
	}
	// On a phone each key is a card that fits the screen, its limits form
	// open too (a browser review: the table ran 408 px wide in a 364 px
	// box, its Revoke buttons and limits form cut off at the edge).
	do(t, tab, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	overflow := run(t, tab, chromedp.Evaluate[int](`(() => {
		document.querySelectorAll('#keys details').forEach(d => d.open = true);
		return document.querySelector('#keys').scrollWidth - document.querySelector('#keys').parentElement.clientWidth;
	})()`))
	if overflow > 0 {
		t.Errorf("at a phone's width the keys table is %d px wider than its box", overflow)
	}
	do(t, tab, chromedp.EmulateViewport(1280, 800))
	html = page(t, tab, s.admin+"/console/keys?customer="+s.customerID)
	navigate(t, tab, chromedp.Click(chromedp.CSS("#key-"+issued.ID+" button.danger")))
	if k, err := cl.Key(ctx, issued.ID); err != nil || k.RevokedAt != nil {
		t.Fatalf("the Revoke button revoked at once (%+v %v): it asks first", k, err)
	}
	navigate(t, tab, chromedp.Click(chromedp.CSS("#confirm-revoke")))
	if n := text(t, tab, "p.notice"); !strings.Contains(n, "revoked") {
		t.Errorf("after revoking, the notice is %q", n)
	}
	if k, err := cl.Key(ctx, issued.ID); err != nil || k.RevokedAt == nil {
		t.Fatalf("after the console's revoke the API has %+v %v", k, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _ := chat(t, s.gateway, secret, "sim-small")
		if status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway still answers the revoked key with %d", status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Signing out ends the session.
	navigate(t, tab, chromedp.Click(chromedp.CSS(".signout button")))
	if loc := run(t, tab, chromedp.Location()); !strings.HasSuffix(loc, "/console/signin?signed_out=1") {
		t.Errorf("after signing out the browser is at %s", loc)
	}
}
