package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// formFields returns the fields of the form whose tag holds marker on
// the page body, as a browser would send them.
func formFields(t *testing.T, body, marker string) url.Values {
	t.Helper()
	start := strings.Index(body, marker)
	if start < 0 {
		t.Fatalf("no form %s on the page:\n%s", marker, body)
	}
	form := body[start : start+strings.Index(body[start:], "</form>")]
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input[^>]*\sname="([^"]+)"[^>]*\svalue="([^"]*)"`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// TestConsolePriceFormSentTwice: the price form sent twice (a double
// click, the browser's resend) added the version once, but the second
// sending's answer, the one the browser shows, was the ledger's conflict
// ("overlaps price version N") with the form filled in again, as if
// nothing had been added. Both sendings now answer that the version was
// added, and it is added once.
func TestConsolePriceFormSentTwice(t *testing.T) {
	g := newRig(t)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/prices", nil)
	form := formFields(t, body, `id="add-price"`)
	form.Set("model", "twice-m")
	form.Set("input", "1")
	form.Set("output", "2")

	// Sent twice at once (a double click), then once more (a resend).
	var wg sync.WaitGroup
	locs := make([]string, 3)
	for i := range 2 {
		wg.Go(func() {
			_, _, h := g.do(c, "POST", "/console/prices", form)
			locs[i] = h.Get("Location")
		})
	}
	wg.Wait()
	_, _, h := g.do(c, "POST", "/console/prices", form)
	locs[2] = h.Get("Location")
	ps, err := g.api.Prices(context.Background(), "twice-m")
	if err != nil || len(ps) != 1 {
		t.Fatalf("versions of twice-m = %d (%v), want 1", len(ps), err)
	}
	// The answer shown last says the version was added.
	_, body, _ = g.do(c, "GET", locs[2], nil)
	notice := between(body, `<p class="notice" role="status">`, "</p>")
	if failure := between(body, `<p class="error" id="error" role="alert">`, "</p>"); failure != "" || !strings.Contains(notice, "added") ||
		!strings.Contains(notice, "twice-m") {
		t.Errorf("the form sent again: notice %q, error %q; want it added", notice, failure)
	}
	if strings.Contains(between(body, `id="add-price"`, "</form>"), `value="twice-m"`) {
		t.Errorf("the form sent again comes back filled in, as if refused")
	}
}

// TestConsoleRevokeConfirmedTwice: the revoke page's button pressed twice
// revoked the key, and the second answer (the one shown) said "key … is
// already revoked" as an error. It says the key was revoked.
func TestConsoleRevokeConfirmedTwice(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("twice", "none", 0)
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	form := url.Values{"csrf": {csrf}, "customer": {cu.ID}, "cursor": {""}, "confirm": {"yes"}}
	var h http.Header
	for range 2 {
		_, _, h = g.do(c, "POST", "/console/keys/"+k.ID+"/revoke", form)
	}
	_, body, _ := g.do(c, "GET", h.Get("Location"), nil)
	notice := between(body, `<p class="notice" role="status">`, "</p>")
	if failure := between(body, `<p class="error" id="error" role="alert">`, "</p>"); failure != "" || !strings.Contains(notice, k.Prefix) ||
		!strings.Contains(notice, "revoked") {
		t.Errorf("revoke confirmed twice: notice %q, error %q; want it said revoked", notice, failure)
	}
}
