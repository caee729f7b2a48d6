package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRefusalsAreThePagesOwn: what the console and the portal refuse
// before a page runs (a query string that does not parse, a form that
// cannot be read or is too large, a form without the session's CSRF
// token) and a statement download asked for a period or customer that is
// none answer with the app's HTML error page, its security headers and
// navigation, as a missing page does (TestMissingPagesAreThePagesOwn):
// they were net/http's plain text, without the way back, one of them
// ("multipart: NextPart: EOF") Go's own words.
func TestRefusalsAreThePagesOwn(t *testing.T) {
	g := newRig(t)
	cu, key, _ := g.customer("r", "model-r", 1)
	console, portal := g.browser(), g.browser()
	csrf := g.signIn(console, "console", "token", adminToken)
	g.signIn(portal, "portal", "key", key)
	big := url.Values{"csrf": {csrf}, "memo": {strings.Repeat("x", 70<<10)}}.Encode()
	for _, c := range []struct {
		client       *http.Client
		method, path string
		ctype, body  string
		status       int
		says         string
	}{
		{console, "GET", "/console/customers?q=%", "", "", http.StatusBadRequest, "query"},
		{portal, "GET", "/portal/requests?cursor=%%%", "", "", http.StatusBadRequest, "query"},
		{portal, "GET", "/portal/statements/2026-13.csv", "", "", http.StatusBadRequest, "YYYY-MM"},
		{console, "GET", "/console/customers/" + cu.ID + "/statements/2026-13.csv", "", "", http.StatusBadRequest, "YYYY-MM"},
		{console, "GET", "/console/customers/00000000-0000-0000-0000-000000000000/statements/2026-01.csv", "", "", http.StatusNotFound, "not found"},
		{console, "POST", "/console/prices", "multipart/form-data; boundary=xx", "--xx\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n" + csrf + "\r\n--xx",
			http.StatusBadRequest, "could not be read"},
		{console, "POST", "/console/customers/" + cu.ID + "/credits", "application/x-www-form-urlencoded", big, http.StatusRequestEntityTooLarge, "larger than"},
		{console, "POST", "/console/prices", "application/x-www-form-urlencoded", "csrf=wrong&model=m", http.StatusForbidden, "CSRF"},
	} {
		req, _ := http.NewRequest(c.method, g.url+c.path, strings.NewReader(c.body))
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			resp.Header.Get("Content-Security-Policy") == "" || !strings.Contains(body, c.says) || !strings.Contains(body, "Sign out") {
			t.Errorf("%s %.80s = %d %q: want %d, the app's page saying %q, with its navigation:\n%.400s", c.method, c.path,
				resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.says, body)
		}
		if strings.Contains(body, "NextPart") {
			t.Errorf("%s %s says Go's own words: %.300s", c.method, c.path, body)
		}
	}
}
