package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSignInReturnsToThePageAsked: a page opened signed out (a link to
// page 2 of a customer's keys, a session that ended) sends the browser to
// sign in, says why, and once signed in, to that page; it ended on the
// first page with nothing said (a browser review). Only a page of the same
// app is gone to: another site, the other app, a dot segment or the
// sign-in page itself go to the app's first page. A portal session whose
// key was revoked is told so.
func TestSignInReturnsToThePageAsked(t *testing.T) {
	g := newRig(t)
	cu, key, _ := g.customer("next-co", "m1", 1)
	c := g.browser()
	page := "/console/keys?customer=" + cu.ID + "&cursor=abc"
	status, _, h := g.do(c, "GET", page, nil)
	want := "/console/signin?next=" + url.QueryEscape(page)
	if status != http.StatusSeeOther || h.Get("Location") != want {
		t.Fatalf("GET %s signed out = %d to %q, want 303 to %q", page, status, h.Get("Location"), want)
	}
	_, body, _ := g.do(c, "GET", want, nil)
	if !strings.Contains(body, "Sign in to see that page") || !strings.Contains(body, `name="next" value="`+strings.ReplaceAll(page, "&", "&amp;")+`"`) {
		t.Fatalf("the sign-in page for a page asked: %s", body)
	}
	status, _, h = g.do(c, "POST", "/console/signin", url.Values{"token": {adminToken}, "next": {page}})
	if status != http.StatusSeeOther || h.Get("Location") != page {
		t.Fatalf("sign in with next = %d to %q, want 303 to %q", status, h.Get("Location"), page)
	}
	for _, next := range []string{"//evil.example/console/", "https://evil.example/console/", "/portal/", "/console/../portal/",
		"/console/signin", "/console/\\evil", "javascript:alert(1)", "/console/%2e%2e/portal/"} {
		status, _, h := g.do(g.browser(), "POST", "/console/signin", url.Values{"token": {adminToken}, "next": {next}})
		if status != http.StatusSeeOther || h.Get("Location") != "/console/" {
			t.Errorf("sign in with next %q = %d to %q, want 303 to /console/", next, status, h.Get("Location"))
		}
	}
	// The portal: a revoked key's session ends with a word of why.
	p := g.browser()
	g.signIn(p, "portal", "key", key)
	if _, err := g.api.RevokeKey(t.Context(), keyIDOf(t, g, cu.ID)); err != nil {
		t.Fatal(err)
	}
	status, _, h = g.do(p, "GET", "/portal/requests", nil)
	if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/portal/signin") {
		t.Fatalf("the portal after its key's revocation = %d to %q", status, h.Get("Location"))
	}
	if _, body, _ := g.do(p, "GET", h.Get("Location"), nil); !strings.Contains(body, "no longer signs in") {
		t.Errorf("the sign-in page after a revocation says nothing of it: %s", body)
	}
}

// keyIDOf is the id of the first key of customer.
func keyIDOf(t *testing.T, g *rig, customer string) string {
	t.Helper()
	ks, err := g.api.Keys(t.Context(), customer)
	if err != nil || len(ks) == 0 {
		t.Fatalf("keys of %s: %v, %v", customer, ks, err)
	}
	return ks[0].ID
}
