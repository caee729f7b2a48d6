package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMissingPagesAreThePagesOwn: a path under /console/ or /portal/ that
// no page has answers 404, and a page asked for with a method it does not
// take 405, as an HTML page of the app with the security headers (a
// review: both were net/http's plain text, without the navigation back);
// a signed-in browser keeps its navigation and sign-out.
func TestMissingPagesAreThePagesOwn(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("m", "model-m", 1)
	anon, console, portal := g.browser(), g.browser(), g.browser()
	g.signIn(console, "console", "token", adminToken)
	g.signIn(portal, "portal", "key", key)
	for _, c := range []struct {
		client          *http.Client
		method, path    string
		status          int
		says, signedOut string
	}{
		{anon, "GET", "/console/no-such-page", http.StatusNotFound, "There is no page at /console/no-such-page.", ""},
		{console, "GET", "/console/no-such-page", http.StatusNotFound, "There is no page at /console/no-such-page.", "Sign out"},
		{console, "GET", "/console/keys/k1/revoke", http.StatusMethodNotAllowed, "The page /console/keys/k1/revoke does not take a GET request.", "Sign out"},
		{anon, "GET", "/portal/nothing/here", http.StatusNotFound, "There is no page at /portal/nothing/here.", ""},
		{portal, "GET", "/portal/nothing/here", http.StatusNotFound, "There is no page at /portal/nothing/here.", "Sign out"},
		{portal, "POST", "/portal/requests", http.StatusMethodNotAllowed, "The page /portal/requests does not take a POST request.", "Sign out"},
	} {
		status, body, h := g.do(c.client, c.method, c.path, nil)
		if status != c.status || !strings.Contains(body, c.says) || !strings.HasPrefix(h.Get("Content-Type"), "text/html") ||
			h.Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s = %d %q (CSP %q): want %d, an HTML page saying %q", c.method, c.path, status, h.Get("Content-Type"),
				h.Get("Content-Security-Policy"), c.status, c.says)
		}
		if signedIn := strings.Contains(body, "Sign out"); signedIn != (c.signedOut != "") {
			t.Errorf("%s %s: the page has a sign-out %v, want %v", c.method, c.path, signedIn, c.signedOut != "")
		}
	}
}
