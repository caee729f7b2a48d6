package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleFormAfterSessionEndedReturns: a form sent after the session
// ended answers with the sign-in page, which says to sign in and send it
// again; signing in there goes back to the page the form was on (its
// Referer, of the console), so that it can be sent again. It went to the
// overview, the customer whose credit was being added left behind.
func TestConsoleFormAfterSessionEndedReturns(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	g.do(c, "POST", "/console/signout", url.Values{"csrf": {csrf}})
	page := "/console/customers/" + cu.ID
	post := func(referer string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", g.url+page+"/credits", strings.NewReader(url.Values{"csrf": {csrf}, "amount": {"5"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Referer", referer)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "send it again") {
			t.Fatalf("a credit after the session ended = %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	if body := post(g.url + page); !strings.Contains(body, `<input type="hidden" name="next" value="`+page+`">`) {
		t.Errorf("the sign-in page after a form sent signed out does not return to %s:\n%s", page, body)
	}
	// A Referer of another site, or of the portal, is not followed.
	for _, ref := range []string{"http://evil.example" + page, g.url + "/portal/"} {
		if body := post(ref); strings.Contains(body, `name="next"`) {
			t.Errorf("Referer %s: the sign-in page returns to it", ref)
		}
	}
	status, _, h := g.do(c, "POST", "/console/signin", url.Values{"token": {adminToken}, "next": {page}})
	if status != http.StatusSeeOther || h.Get("Location") != page {
		t.Errorf("sign in with next=%s = %d to %q", page, status, h.Get("Location"))
	}
}
