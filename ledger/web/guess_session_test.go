package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestWrongTokensDoNotLockOutSignedInOperators: the admin API slows down
// wrong tokens per client address (guesses.go), and the console made
// every call of a signed-in session with its browser's address, so the
// session's calls were refused with the guesses' 429 too. Behind the
// TLS-terminating proxy the console expects (overTLS), every browser has
// the proxy's address: anyone who could reach the sign-in page, sending
// more than one wrong token a second, locked every signed-in operator
// out of every page ("too many wrong admin tokens from this address" in
// place of the figures). A session's token was checked at its sign-in;
// its calls guess nothing. The sign-in itself is still slowed down.
func TestWrongTokensDoNotLockOutSignedInOperators(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme-behind-the-proxy", "m1", 1)
	operator := g.browser()
	g.signIn(operator, "console", "token", adminToken)
	guesser := g.browser() // the same address as the operator's (the rig's, as a proxy's)
	for i := range api.GuessBurst + 5 {
		if status, _, _ := g.do(guesser, "POST", "/console/signin", url.Values{"token": {"a-guess"}}); status != http.StatusUnauthorized && status != http.StatusTooManyRequests {
			t.Fatalf("wrong token %d: %d, want 401 or 429", i+1, status)
		}
	}
	for _, path := range []string{"/console/customers", "/console/customers/" + cu.ID, "/console/keys?customer=" + cu.ID} {
		status, body, _ := g.do(operator, "GET", path, nil)
		if status != http.StatusOK || strings.Contains(body, "too many wrong admin tokens") || !strings.Contains(body, "acme-behind-the-proxy") {
			t.Errorf("GET %s of the signed-in operator after another browser's wrong tokens from its address: %d, want 200 with the customer:\n%s", path, status, body)
		}
	}
	// The sign-in is still slowed down: the right token is refused there
	// until the wait is over.
	if status, body, _ := g.do(g.browser(), "POST", "/console/signin", url.Values{"token": {adminToken}}); status != http.StatusTooManyRequests {
		t.Errorf("the right token at the sign-in after %d wrong ones: %d, want 429:\n%s", api.GuessBurst+5, status, body)
	}
}
