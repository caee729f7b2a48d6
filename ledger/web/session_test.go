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
