package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

func TestConsoleSignIn(t *testing.T) {
	g := newRig(t)
	c := g.browser()
	if status, _, h := g.do(c, "GET", "/console/", nil); status != http.StatusSeeOther || h.Get("Location") != "/console/signin" {
		t.Fatalf("GET /console/ signed out = %d to %q, want 303 to the sign-in page", status, h.Get("Location"))
	}
	for _, token := range []string{"", "wrong", adminToken + "x"} {
		status, body, h := g.do(c, "POST", "/console/signin", url.Values{"token": {token}})
		if status != http.StatusUnauthorized || h.Get("Set-Cookie") != "" || strings.Contains(body, adminToken) {
			t.Errorf("sign in with %q = %d, cookie %q, want 401 and no cookie", token, status, h.Get("Set-Cookie"))
		}
	}
	status, _, h := g.do(c, "POST", "/console/signin", url.Values{"token": {adminToken}})
	if status != http.StatusSeeOther {
		t.Fatalf("sign in = %d, want 303", status)
	}
	cookie := h.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/console/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, adminToken) {
		t.Errorf("the session cookie holds the admin token: %q", cookie)
	}
	for _, p := range []string{"/console/", "/console/customers", "/console/keys", "/console/prices", "/console/reconciliation", "/console/dlq"} {
		status, body, h := g.do(c, "GET", p, nil)
		if status != http.StatusOK || strings.Contains(body, adminToken) || h.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s = %d (CSP %q), want 200 without the token", p, status, h.Get("Content-Security-Policy"))
		}
	}
	csrf := csrfField.FindStringSubmatch(func() string { _, b, _ := g.do(c, "GET", "/console/", nil); return b }())[1]
	if status, _, _ := g.do(c, "POST", "/console/signout", url.Values{"csrf": {csrf}}); status != http.StatusSeeOther {
		t.Fatalf("sign out = %d", status)
	}
	if status, _, _ := g.do(c, "GET", "/console/customers", nil); status != http.StatusSeeOther {
		t.Errorf("GET /console/customers after sign-out = %d, want 303 to sign in", status)
	}
}

// TestConsoleCSRF: a write without the session's CSRF token, with a wrong
// one, or posted from another origin is refused and writes nothing.
func TestConsoleCSRF(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("csrf-co", "m1", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	path := "/console/customers/" + cust.ID + "/credits"
	for name, form := range map[string]url.Values{
		"no token":    {"amount": {"5"}},
		"wrong token": {"amount": {"5"}, "csrf": {csrf + "x"}},
	} {
		if status, _, _ := g.do(c, "POST", path, form); status != http.StatusForbidden {
			t.Errorf("%s: POST %s = %d, want 403", name, path, status)
		}
	}
	req, _ := http.NewRequest("POST", g.url+path, strings.NewReader(url.Values{"amount": {"5"}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST = %v %v, want 403", resp.StatusCode, err)
	}
	es, err := g.api.Entries(context.Background(), cust.ID, zero, zero)
	if err != nil || len(es) != 0 {
		t.Fatalf("entries after refused writes = %v %v, want none", es, err)
	}
	if status, _, _ := g.do(c, "POST", path, url.Values{"amount": {"5"}, "csrf": {csrf}, "memo": {"welcome"}}); status != http.StatusSeeOther {
		t.Fatalf("POST with the CSRF token = %d, want 303", status)
	}
	b, err := g.api.Balance(context.Background(), cust.ID)
	if err != nil || b.Credits != "5" {
		t.Fatalf("balance after the credit = %+v %v, want credits 5", b, err)
	}
	_, body, _ := g.do(c, "GET", "/console/customers/"+cust.ID, nil)
	if !strings.Contains(body, "welcome") || !strings.Contains(body, "Credit of 5 USD recorded (entry ") {
		t.Errorf("the customer page does not show the credit and its notice")
	}
}

// TestConsoleKeys issues a key (secret shown once), sets limits and
// revokes it, all through the admin API. The issue redirects to the page
// that shows the secret (post, redirect, get): rendered as the POST's
// answer, a reload issued a second live key (a review); a second view
// of the page shows no secret, and issues nothing.
func TestConsoleKeys(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("keys-co", "m1", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	status, body, h := g.do(c, "POST", "/console/customers/"+cust.ID+"/keys", url.Values{"csrf": {csrf}, "name": {"web"},
		"rpm_limit": {"60"}, "daily_limit": {"50"}, "allowed_models": {"m1, m2"}})
	issuedPage := "/console/keys/issued?customer=" + cust.ID
	if status != http.StatusSeeOther || h.Get("Location") != issuedPage {
		t.Fatalf("issue = %d %s (to %q), want 303 to %s", status, body, h.Get("Location"), issuedPage)
	}
	// A HEAD (a link checker, a prefetch) does not use up the one view.
	if status, _, _ := g.do(c, "HEAD", issuedPage, nil); status != http.StatusOK {
		t.Fatalf("HEAD of the issued page = %d, want 200", status)
	}
	status, body, _ = g.do(c, "GET", issuedPage, nil)
	if status != http.StatusOK || !strings.Contains(body, `id="secret"`) {
		t.Fatalf("the issued page = %d %s", status, body)
	}
	secret := between(body, `aria-label="The new key's secret">`, "<")
	// Once shown, a reload goes back to the customer's keys (it went to
	// the customers page, a review), and a HEAD where the GET goes.
	keysPage := "/console/keys?customer=" + cust.ID
	if status, _, h := g.do(c, "HEAD", issuedPage, nil); status != http.StatusSeeOther || h.Get("Location") != keysPage {
		t.Fatalf("HEAD of the issued page once shown = %d to %q; want the GET's 303 to %s", status, h.Get("Location"), keysPage)
	}
	if status, again, h := g.do(c, "GET", issuedPage, nil); status != http.StatusSeeOther || strings.Contains(again, secret) || h.Get("Location") != keysPage {
		t.Fatalf("a second view of the issued page = %d (to %q) %s; want a redirect, the secret not shown again", status, h.Get("Location"), again)
	}
	ks, err := g.api.Keys(context.Background(), cust.ID)
	if err != nil || len(ks) != 2 {
		t.Fatalf("keys = %v %v", ks, err)
	}
	var k ledger.Key
	for _, x := range ks {
		if x.Name == "web" {
			k = x
		}
	}
	if !strings.HasPrefix(secret, k.Prefix) || k.RPMLimit == nil || *k.RPMLimit != 60 || strings.Join(k.AllowedModels, ",") != "m1,m2" ||
		k.DailyLimit == nil || *k.DailyLimit != "50" {
		t.Fatalf("issued key %+v, secret %q", k, secret)
	}
	_, body, _ = g.do(c, "GET", "/console/keys?customer="+cust.ID, nil)
	if strings.Contains(body, secret) {
		t.Errorf("the keys page shows the secret again")
	}
	// A key's spend limits are shown, and the limits form holds them: an
	// operator looking at a key answered 402 for its daily limit sees why.
	if row := between(body, `id="key-`+k.ID+`"`, "</td></tr>"); !strings.Contains(row, "daily 50 "+cust.Currency) ||
		!strings.Contains(row, "monthly –") || !strings.Contains(row, `name="daily_limit" value="50"`) {
		t.Errorf("the key's row does not show its daily limit of 50 %s:\n%s", cust.Currency, row)
	}
	if status, _, _ := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", url.Values{"csrf": {csrf}, "customer": {cust.ID}, "tpm_limit": {"1000"},
		"monthly_limit": {"100.5"}}); status != http.StatusSeeOther {
		t.Fatalf("limits = %d", status)
	}
	k2, _ := g.api.Key(context.Background(), k.ID)
	if k2.RPMLimit != nil || k2.TPMLimit == nil || *k2.TPMLimit != 1000 || len(k2.AllowedModels) != 0 ||
		k2.DailyLimit != nil || k2.MonthlyLimit == nil || *k2.MonthlyLimit != "100.5" {
		t.Errorf("after the limits form: %+v, want rpm none, tpm 1000, every model, no daily limit, monthly 100.5", k2)
	}
	g.do(c, "POST", "/console/keys/"+k.ID+"/limits", url.Values{"csrf": {csrf}, "customer": {cust.ID}, "daily_limit": {"lots"}})
	_, body, _ = g.do(c, "GET", "/console/keys?customer="+cust.ID, nil)
	if k3, _ := g.api.Key(context.Background(), k.ID); k3.MonthlyLimit == nil || !strings.Contains(body, "daily_limit") {
		t.Errorf("a daily limit of \"lots\": key %+v, page does not name the field:\n%s", k3, body)
	}
	// Revoke asks first: a revocation cannot be undone.
	status, body, _ = g.do(c, "POST", "/console/keys/"+k.ID+"/revoke", url.Values{"csrf": {csrf}, "customer": {cust.ID}})
	if status != http.StatusOK || !strings.Contains(body, "Revoke the key <strong>web</strong>") || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("revoke, unconfirmed = %d, want the page that asks:\n%s", status, body)
	}
	if k3, _ := g.api.Key(context.Background(), k.ID); k3.RevokedAt != nil {
		t.Fatalf("the key was revoked before the operator confirmed")
	}
	if status, _, _ := g.do(c, "POST", "/console/keys/"+k.ID+"/revoke", url.Values{"csrf": {csrf}, "customer": {cust.ID}, "confirm": {"yes"}}); status != http.StatusSeeOther {
		t.Fatalf("revoke = %d", status)
	}
	if k3, _ := g.api.Key(context.Background(), k.ID); k3.RevokedAt == nil {
		t.Errorf("the key is not revoked")
	}
}

func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, to)
	return v
}

// TestConsoleReconciliationListsWhatDiffers: the reconciliation page
// counted rollup and balance mismatches but listed only unpriced models,
// so an operator saw "1 rollup mismatch" and had to go to the admin API to
// learn which row. It now lists each: the rollup row (hour, customer, key,
// model, currency, the figures that differ, events against rollup) and
// the balance (ledger against stored).
func TestConsoleReconciliationListsWhatDiffers(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("drift-co", "m1", 3)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, g.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	// A rollup row and a balance changed behind the ledger's back. The
	// customer's three events are a minute apart, so near the top of an
	// hour they are in two rollup rows: one of them is changed.
	var requests int64
	if err := db.QueryRow(ctx, `UPDATE usage_hourly SET requests = requests + 1
		WHERE customer_id = $1 AND hour = (SELECT max(hour) FROM usage_hourly WHERE customer_id = $1)
		RETURNING requests`, cust.ID).Scan(&requests); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO customer_balances (customer_id, currency, charges_e12) VALUES ($1, 'USD', 2000000000000)
		ON CONFLICT (customer_id, currency) DO UPDATE SET charges_e12 = customer_balances.charges_e12 + 2000000000000`, cust.ID); err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	now := time.Now().UTC()
	status, body, _ := g.do(c, "GET", "/console/reconciliation?from="+now.Add(-3*time.Hour).Format("2006-01-02T15:04")+
		"&to="+now.Add(2*time.Hour).Format("2006-01-02T15:04"), nil)
	if status != http.StatusOK || !strings.Contains(body, "does not add up") {
		t.Fatalf("GET /console/reconciliation = %d, want 200 and a ledger that does not add up:\n%s", status, body)
	}
	for _, want := range []string{`id="rollup-mismatches"`, `<a href="/console/customers/` + cust.ID + `">`, "<td>m1</td>",
		"<td>requests</td>", fmt.Sprintf(`<td class="n">%d / %d</td>`, requests-1, requests), `id="balance-mismatches"`, "<td>USD</td>", `<td class="n">0 / 2</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the reconciliation page lacks %q:\n%s", want, body)
		}
	}
}

// TestConsolePriceBook: the price book's "In force now" listed every
// version started and not ended, superseded open-ended ones beside their
// successors, showed no reasoning, request fee or web search price, and
// its form took a date only, so a version added at 14:05 started at 00:00
// that day, back-dated over usage already rated (found by the finance
// review). Now each model's version in force is listed, with the
// open-ended one a promotion interrupts ("resumes …"); superseded ones are
// past; and the form's default start is the next minute, with every price
// and an end.
func TestConsolePriceBook(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	now := time.Now().UTC()
	y2020, y2021 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	promoFrom, promoTo := now.Add(-time.Hour), now.Add(time.Hour)
	oldEnd := time.Date(2021, 2, 1, 0, 0, 0, 0, time.UTC)
	ids := map[string]int64{}
	for name, in := range map[string]ledger.PriceInput{
		"superseded": {Model: "pb-a", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: y2020},
		"base":       {Model: "pb-a", Currency: "USD", Input: "2", Output: "2", Reasoning: "3", EffectiveFrom: y2021},
		"promo":      {Model: "pb-a", Currency: "USD", Input: "0.5", Output: "0.5", EffectiveFrom: promoFrom, EffectiveTo: &promoTo},
		"scheduled":  {Model: "pb-a", Currency: "USD", Input: "4", Output: "4", EffectiveFrom: now.Add(24 * time.Hour)},
		"b":          {Model: "pb-b", Currency: "USD", Input: "1", Output: "1", RequestFee: "0.001", EffectiveFrom: y2020},
		"b-ended":    {Model: "pb-b", Currency: "USD", Input: "0.1", Output: "0.1", EffectiveFrom: y2021, EffectiveTo: &oldEnd},
	} {
		p, err := g.api.CreatePrice(ctx, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ids[name] = p.ID
	}
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/prices", nil)
	section := func(id string) string { return between(body, `id="`+id+`"`, "</table>") }
	row := func(sec, name string) string {
		return between(sec, fmt.Sprintf("<tr><td>%d</td>", ids[name]), "</tr>")
	}
	current, scheduled := section("current"), section("scheduled")
	past := body[strings.Index(body, "Past versions"):]
	for _, c := range []struct{ sec, name, want string }{
		{current, "promo", "promotion"},
		{current, "base", "resumes " + promoTo.Format("2006-01-02 15:04") + ", after version " + fmt.Sprint(ids["promo"])},
		{current, "b", "0.001"},
		{scheduled, "scheduled", "pb-a"},
		{past, "superseded", "superseded"},
		{past, "b-ended", "pb-b"},
	} {
		if r := row(c.sec, c.name); r == "" || !strings.Contains(r, c.want) {
			t.Errorf("version %q: row %q, want it in its section with %q", c.name, r, c.want)
		}
	}
	if row(current, "superseded") != "" || row(current, "b-ended") != "" {
		t.Errorf("In force now lists a superseded or ended version:\n%s", current)
	}
	if !strings.Contains(row(current, "base"), ">3<") {
		t.Errorf("the reasoning price is not shown: %q", row(current, "base"))
	}

	// The form as it stands starts the version at the next minute.
	from := between(body, `name="effective_from" type="datetime-local" value="`, `"`)
	status, _, _ := g.do(c, "POST", "/console/prices", url.Values{"csrf": {csrf}, "model": {"pb-c"}, "currency": {"USD"},
		"input": {"1"}, "output": {"2"}, "reasoning": {"5"}, "request_fee": {"0.002"}, "web_search": {"0.01"},
		"effective_from": {from}, "effective_to": {now.Add(48 * time.Hour).Format("2006-01-02T15:04")}})
	if status != http.StatusSeeOther {
		t.Fatalf("add a version = %d", status)
	}
	ps, err := g.api.Prices(ctx, "pb-c")
	if err != nil || len(ps) != 1 {
		t.Fatalf("prices of pb-c = %v, %v", ps, err)
	}
	p := ps[0]
	if p.EffectiveFrom.Before(now) || p.EffectiveFrom.After(now.Add(2*time.Minute)) || p.EffectiveTo == nil ||
		p.Reasoning != "5" || p.RequestFee != "0.002" || p.WebSearch != "0.01" {
		t.Errorf("the version added with the form's default start = %+v; want it from the next minute (not before %s), with its prices and end", p, now)
	}
}

// TestConsoleFindsACustomerByIDInAnyCase: the customers search matched an
// id only as the API writes it (lower case); one pasted from elsewhere in
// upper case found nothing. (Found by review.)
func TestConsoleFindsACustomerByIDInAnyCase(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("case-co", "m1", 0)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	for _, q := range []string{cust.ID, strings.ToUpper(cust.ID)} {
		if _, body, _ := g.do(c, "GET", "/console/customers?q="+url.QueryEscape(q), nil); !strings.Contains(body, "case-co") {
			t.Errorf("search %s: case-co not found", q)
		}
	}
}
