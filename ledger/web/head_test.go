package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPagesAnswerHEAD: a HEAD of a console or portal page is answered as
// its GET is, without the body (RFC 9110 9.3.2: a server that answers GET
// should answer HEAD). They answered 405, which link checkers and uptime
// probes read as the page being broken.
func TestPagesAnswerHEAD(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("h", "model-h", 1)
	anon, console, portal := g.browser(), g.browser(), g.browser()
	g.signIn(console, "console", "token", adminToken)
	g.signIn(portal, "portal", "key", key)
	for _, c := range []struct {
		client *http.Client
		path   string
	}{
		{anon, "/console/signin"}, {anon, "/portal/signin"}, {anon, "/console/static/style.css"},
		{console, "/console/"}, {console, "/console/customers"}, {portal, "/portal/"}, {portal, "/portal/requests"},
	} {
		getStatus, _, getHeader := g.do(c.client, "GET", c.path, nil)
		status, body, h := g.do(c.client, "HEAD", c.path, nil)
		if status != http.StatusOK || getStatus != http.StatusOK || body != "" || h.Get("Content-Type") != getHeader.Get("Content-Type") {
			t.Errorf("HEAD %s = %d, %d bytes, %q; GET = %d %q: want 200, no body, GET's type", c.path, status, len(body), h.Get("Content-Type"), getStatus, getHeader.Get("Content-Type"))
		}
	}
	// Signed out, a HEAD of a page is sent to sign in, as a GET is.
	getStatus, _, getHeader := g.do(anon, "GET", "/console/customers", nil)
	if status, _, h := g.do(anon, "HEAD", "/console/customers", nil); status != getStatus || h.Get("Location") != getHeader.Get("Location") || getHeader.Get("Location") == "" {
		t.Errorf("HEAD /console/customers signed out = %d to %q; GET = %d to %q: want the same redirect to sign in",
			status, h.Get("Location"), getStatus, getHeader.Get("Location"))
	}
}

// TestHEADKeepsWhatTheLastWriteSaid: a HEAD of a page (answered by its
// GET handler) does not use up the notice the last write left, as it does
// not the issued key's secret (a review: a link checker erased "Credit of
// 5 USD recorded" before the operator saw it).
func TestHEADKeepsWhatTheLastWriteSaid(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("flash-co", "m1", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	if status, _, _ := g.do(c, "POST", "/console/customers/"+cust.ID+"/credits", url.Values{"amount": {"5"}, "csrf": {csrf}}); status != http.StatusSeeOther {
		t.Fatalf("credit = %d", status)
	}
	if status, _, _ := g.do(c, "HEAD", "/console/customers/"+cust.ID, nil); status != http.StatusOK {
		t.Fatalf("HEAD = %d", status)
	}
	if _, body, _ := g.do(c, "GET", "/console/customers/"+cust.ID, nil); !strings.Contains(body, "Credit of 5 USD recorded") {
		t.Errorf("after a HEAD, the GET no longer says the credit was recorded")
	}
}
