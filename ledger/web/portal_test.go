package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

var zero time.Time

// TestPortalIsolation: customer A's portal shows A's requests and costs,
// never B's; a wrong or revoked key cannot sign in; the statement download
// is the API's CSV.
func TestPortalIsolation(t *testing.T) {
	g := newRig(t)
	a, keyA, idsA := g.customer("alpha", "model-alpha", 3)
	_, keyB, idsB := g.customer("bravo", "model-bravo", 2)
	c := g.browser()
	for _, k := range []string{"", "tg-nope", keyA + "x"} {
		if status, _, h := g.do(c, "POST", "/portal/signin", url.Values{"key": {k}}); status != http.StatusUnauthorized || h.Get("Set-Cookie") != "" {
			t.Errorf("portal sign in with %q = %d, want 401 and no cookie", k, status)
		}
	}
	g.signIn(c, "portal", "key", keyA)
	var all strings.Builder
	for _, p := range []string{"/portal/", "/portal/requests", "/portal/statements"} {
		status, body, _ := g.do(c, "GET", p, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", p, status, body)
		}
		if strings.Contains(body, keyA) {
			t.Errorf("%s shows the key", p)
		}
		all.WriteString(body)
	}
	page := all.String()
	for _, id := range idsA {
		if !strings.Contains(page, id) {
			t.Errorf("A's request %s is not on A's portal", id)
		}
	}
	for _, bad := range append(idsB, "model-bravo", "bravo", keyB) {
		if strings.Contains(page, bad) {
			t.Errorf("A's portal shows B's %q", bad)
		}
	}
	period := time.Now().UTC().Format("2006-01")
	_, csv, h := g.do(c, "GET", "/portal/statements/"+period+".csv", nil)
	var want strings.Builder
	if _, err := g.api.WriteStatement(context.Background(), a.ID, period, "csv", &want); err != nil {
		t.Fatal(err)
	}
	if csv != want.String() || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
		t.Errorf("portal statement CSV differs from the API's:\n%s\nwant\n%s", csv, want.String())
	}
	// A key revoked after sign-in ends the session at the next page.
	ks, _ := g.api.Keys(context.Background(), a.ID)
	if _, err := g.api.RevokeKey(context.Background(), ks[0].ID); err != nil {
		t.Fatal(err)
	}
	if status, _, h := g.do(c, "GET", "/portal/", nil); status != http.StatusSeeOther || h.Get("Location") != "/portal/signin?ended=refused" {
		t.Errorf("portal after the key's revocation = %d to %q, want 303 to sign in", status, h.Get("Location"))
	}
	if status, _, _ := g.do(g.browser(), "POST", "/portal/signin", url.Values{"key": {keyA}}); status != http.StatusUnauthorized {
		t.Errorf("sign in with a revoked key = %d, want 401", status)
	}
}
