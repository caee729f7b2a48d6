package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleCreditMoreDecimalsThanTheCurrency: the credit form recorded
// "10.005" for a JPY customer as 10.005 JPY, a yen having no decimals:
// most likely 10,005 yen written with a thousands separator, or a typo
// in USD's cents. A credit with more decimals than the currency's minor
// unit is refused once, the page saying why, the form kept; sent again
// as it is, it is recorded as typed (the ledger keeps micro-units).
func TestConsoleCreditMoreDecimalsThanTheCurrency(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	jp, err := g.api.CreateCustomer(ctx, ledger.CustomerInput{Name: "yen", Currency: "JPY"})
	if err != nil {
		t.Fatal(err)
	}
	us, _, _ := g.customer("dollars", "none", 0)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	credit := func(id, amount string, form url.Values) (notice, failure, body string) {
		t.Helper()
		if form == nil {
			_, page, _ := g.do(c, "GET", "/console/customers/"+id, nil)
			form = formFields(t, page, `/credits"`)
		}
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("amount", amount)
		status, _, h := g.do(c, "POST", "/console/customers/"+id+"/credits", f)
		if status != http.StatusSeeOther {
			t.Fatalf("credit %s = %d", amount, status)
		}
		_, body, _ = g.do(c, "GET", h.Get("Location"), nil)
		return between(body, `<p class="notice" role="status">`, "</p>"), between(body, `<p class="error" id="error" role="alert">`, "</p>"), body
	}
	// Two decimals in USD, and trailing zeros, are taken at once.
	if n, f, _ := credit(us.ID, "10.50", nil); f != "" || !strings.Contains(n, "Credit of 10.5 USD recorded") {
		t.Errorf("10.50 USD: notice %q, error %q", n, f)
	}
	// As many decimals as the currency has (a mutation audit: a check of
	// places >= scale, refusing 10.25 USD once, passed).
	if n, f, _ := credit(us.ID, "10.25", nil); f != "" || !strings.Contains(n, "Credit of 10.25 USD recorded") {
		t.Errorf("10.25 USD: notice %q, error %q", n, f)
	}
	if n, f, _ := credit(jp.ID, "1000.000", nil); f != "" || !strings.Contains(n, "Credit of 1000 JPY recorded") {
		t.Errorf("1000.000 JPY: notice %q, error %q", n, f)
	}
	// Three decimals in yen: refused once, the form kept.
	n, f, body := credit(jp.ID, "10.005", nil)
	if n != "" || !strings.Contains(f, "Credit amount: &#34;10.005&#34; has 3 decimal places, and a JPY has 0") ||
		!strings.Contains(f, "send the form again") {
		t.Errorf("10.005 JPY: notice %q, error %q; want it refused, saying why", n, f)
	}
	kept := formFields(t, body, `/credits"`)
	if kept.Get("amount") != "10.005" {
		t.Errorf("the refused credit form holds %q", kept.Get("amount"))
	}
	if es, _ := g.api.Entries(ctx, jp.ID, time.Time{}, time.Time{}); len(es) != 1 {
		t.Fatalf("after the refusal the customer has %d entries, want 1", len(es))
	}
	// Changed to another amount of too many decimals: refused again.
	if n, f, _ := credit(jp.ID, "10.006", kept); n != "" || !strings.Contains(f, "3 decimal places") {
		t.Errorf("10.006 JPY after 10.005 was refused: notice %q, error %q; want it refused", n, f)
	}
	// Sent again as it is: recorded.
	if n, f, _ := credit(jp.ID, "10.005", kept); f != "" || !strings.Contains(n, "Credit of 10.005 JPY recorded") {
		t.Errorf("10.005 JPY sent again: notice %q, error %q; want it recorded", n, f)
	}
	if n, f, _ := credit(us.ID, "0.001", nil); n != "" || !strings.Contains(f, "has 3 decimal places, and a USD has 2") {
		t.Errorf("0.001 USD: notice %q, error %q; want it refused", n, f)
	}
}
