package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestFormAfterSessionEndedSaysSo: a form posted after the console
// session ended was answered with a bare 401 text/plain "not signed in".
// It gets the sign-in page, saying the session ended and nothing was
// done; and nothing is.
func TestFormAfterSessionEndedSaysSo(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("late", "none", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	if status, _, _ := g.do(c, "POST", "/console/signout", url.Values{"csrf": {csrf}}); status != http.StatusSeeOther {
		t.Fatalf("sign out = %d", status)
	}
	status, body, h := g.do(c, "POST", "/console/customers/"+cu.ID+"/credits",
		url.Values{"csrf": {csrf}, "amount": {"5"}, "idempotency_key": {"late-1"}})
	if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Errorf("a credit after sign-out = %d %s, want 401 HTML", status, h.Get("Content-Type"))
	}
	for _, want := range []string{"Your session has ended", "was not done", `action="/console/signin"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the answer lacks %q:\n%s", want, body)
		}
	}
	if b, err := g.api.Balance(context.Background(), cu.ID); err != nil || b.Credits != "0" {
		t.Errorf("credits = %q (%v), want 0", b.Credits, err)
	}
}

// TestSignedOutCookieIsRefused: signing out ends the session on the
// server, not only in the browser: the session's cookie, replayed after
// "Sign out" (copied off a shared computer, kept by a proxy's log), reads
// no page of the portal or the console. A mutation audit: a sign-out that
// only cleared the browser's cookie passed every test.
func TestSignedOutCookieIsRefused(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("signed-out", "none", 0)
	for _, app := range []struct{ name, field, secret string }{{"portal", "key", key}, {"console", "token", adminToken}} {
		c := g.browser()
		csrf := g.signIn(c, app.name, app.field, app.secret)
		u, _ := url.Parse(g.url + "/" + app.name + "/")
		cookies := c.Jar.Cookies(u)
		if status, _, _ := g.do(c, "POST", "/"+app.name+"/signout", url.Values{"csrf": {csrf}}); status != http.StatusSeeOther {
			t.Fatalf("%s sign out = %d", app.name, status)
		}
		replay := g.browser()
		replay.Jar.SetCookies(u, cookies)
		if status, _, h := g.do(replay, "GET", "/"+app.name+"/", nil); status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/"+app.name+"/signin") {
			t.Errorf("%s with the signed-out session's cookie = %d to %q, want 303 to the sign-in page", app.name, status, h.Get("Location"))
		}
	}
}

// TestRevokedKeyEndsThePortalSession: a key revoked after sign-in ends
// its portal session on the server, so the sign-in page it is sent to
// shows the form, saying why (a session kept alive sent the browser from
// the sign-in page back to the portal, and from there to the sign-in page
// again, for ever). A mutation audit: a portal that only redirected,
// keeping the session, passed every test.
func TestRevokedKeyEndsThePortalSession(t *testing.T) {
	g := newRig(t)
	cu, key, _ := g.customer("revoked", "none", 0)
	c := g.browser()
	g.signIn(c, "portal", "key", key)
	ks, err := g.api.Keys(context.Background(), cu.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.api.RevokeKey(context.Background(), ks[0].ID); err != nil {
		t.Fatal(err)
	}
	status, _, h := g.do(c, "GET", "/portal/", nil)
	if status != http.StatusSeeOther || h.Get("Location") != "/portal/signin?ended=refused" {
		t.Fatalf("the portal after the key's revocation = %d to %q, want 303 to /portal/signin?ended=refused", status, h.Get("Location"))
	}
	status, body, _ := g.do(c, "GET", h.Get("Location"), nil)
	if status != http.StatusOK || !strings.Contains(body, `action="/portal/signin"`) || !strings.Contains(body, "no longer signs in") {
		t.Errorf("the sign-in page after the revocation = %d, want 200 with the form saying why:\n%s", status, body)
	}
}

// TestSignInFromAnotherSiteIsRefused: a sign-in form posted from another
// site (login CSRF: the attacker's own key, signing the victim's browser
// in to the attacker's account) is refused, 403 with no session cookie,
// on the portal and the console alike. A mutation audit: dropping the
// sign-in's Origin check passed every test.
func TestSignInFromAnotherSiteIsRefused(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("attacker", "none", 0)
	for _, app := range []struct{ name, field, secret string }{{"portal", "key", key}, {"console", "token", adminToken}} {
		req, _ := http.NewRequest("POST", g.url+"/"+app.name+"/signin", strings.NewReader(url.Values{app.field: {app.secret}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := g.browser().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("%s sign-in posted from another site = %d with %d cookies, want 403 and none", app.name, resp.StatusCode, len(resp.Cookies()))
		}
	}
}
