package web_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestBalanceCardsSayTheirCurrency: every amount on the balance cards of
// the portal's usage page and the console's customer page says its
// currency, as the Balance card does: a customer billed in JPY read
// "Credits 5000" and "Credit limit 20000" beside "Balance 5000 JPY".
func TestBalanceCardsSayTheirCurrency(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	limit := "20000"
	cu, err := g.api.CreateCustomer(ctx, ledger.CustomerInput{Name: "yen", Currency: "JPY", CreditLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.api.AddEntry(ctx, cu.ID, ledger.KindCredit, ledger.EntryInput{Amount: "5000"}); err != nil {
		t.Fatal(err)
	}
	card := regexp.MustCompile(`(?s)<div class="card"><div class="label">([^<]+)</div><div class="value"[^>]*>([^<]*)</div>`)
	money := map[string]bool{"Balance": true, "Credits": true, "Charges": true, "Credit limit": true, "Available": true, "Spend this month": true}
	check := func(app, path string) {
		t.Helper()
		c := g.browser()
		if app == "portal" {
			g.signIn(c, app, "key", k.Secret)
		} else {
			g.signIn(c, app, "token", adminToken)
		}
		_, body, _ := g.do(c, "GET", path, nil)
		seen := 0
		for _, m := range card.FindAllStringSubmatch(body, -1) {
			if !money[m[1]] {
				continue
			}
			seen++
			if !regexp.MustCompile(`^-?[0-9][0-9,.]* JPY$`).MatchString(m[2]) {
				t.Errorf("%s: card %q shows %q, want an amount in JPY", path, m[1], m[2])
			}
		}
		if seen < 4 {
			t.Fatalf("%s: %d money cards found, want at least 4:\n%s", path, seen, body)
		}
	}
	check("portal", "/portal/")
	check("console", "/console/customers/"+cu.ID)
}
