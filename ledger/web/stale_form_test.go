package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleFormWithAStaleTokenKeepsInput: a console form sent from a
// page loaded before the operator signed in again (in another tab: a new
// session, with a new CSRF token) is not acted on, and was answered with a
// bare 403 that lost what was typed. It comes back to the page it was on,
// filled in as it was typed, saying it was not sent. A form with a wrong
// token that does not say it came from this site (no Origin) is refused
// as before, and kept nowhere.
func TestConsoleFormWithAStaleTokenKeepsInput(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	c := g.browser()
	stale := g.signIn(c, "console", "token", adminToken)
	if fresh := g.signIn(c, "console", "token", adminToken); fresh == stale {
		t.Fatal("a second sign-in kept the first session's CSRF token")
	}
	page := "/console/customers/" + cu.ID
	post := func(origin string) (int, http.Header, string) {
		form := url.Values{"csrf": {stale}, "amount": {"1000"}, "memo": {"invoice \"7\""}, "idempotency_key": {"k1"}}
		req, _ := http.NewRequest("POST", g.url+page+"/credits", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Referer", g.url+page)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	if status, _, body := post(""); status != http.StatusForbidden {
		t.Fatalf("a form with a stale token and no Origin = %d %s; want 403", status, body)
	}
	status, h, body := post(g.url)
	if status != http.StatusSeeOther || h.Get("Location") != page {
		t.Fatalf("a form with a stale token from the console's page = %d to %q %s; want 303 back to %s", status, h.Get("Location"), body, page)
	}
	_, body, _ = g.do(c, "GET", page, nil)
	for k, v := range map[string]string{"amount": "1000", "memo": "invoice \"7\""} {
		if !fieldHolds(body, k, v) {
			t.Errorf("the page after a stale form: field %s does not hold %q", k, v)
		}
	}
	if !strings.Contains(body, "was not sent") {
		t.Error("the page after a stale form does not say it was not sent")
	}
	if bal, _ := g.api.Balance(t.Context(), cu.ID); bal.Credits != "0" {
		t.Errorf("the customer has credits %s; want 0: a form with a stale token was acted on", bal.Credits)
	}
}
