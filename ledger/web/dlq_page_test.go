package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestConsoleDeadLetterPages: the dead-letter page lists 200 letters and
// links to the next page, as the customers and keys pages do; the next
// page lists the rest, links back to the first and to no next one; a
// letter there can be removed (its confirmation found it on the first
// page only, and said it was not found), and the removal returns to that
// page. The page showed the oldest 200 and nothing past them.
func TestConsoleDeadLetterPages(t *testing.T) {
	g, deadLetter := newDLQRig(t)
	var seqs []string
	for i := range 205 {
		seqs = append(seqs, deadLetter("schema version 7, letter "+strconv.Itoa(i)))
	}
	shown := func(body, seq string) bool { return strings.Contains(body, `"Remove dead letter `+seq+`"`) }
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/dlq", nil)
	next := `href="/console/dlq?cursor=` + seqs[199] + `" rel="next">Next page</a>`
	if !shown(body, seqs[0]) || !shown(body, seqs[199]) || shown(body, seqs[200]) || !strings.Contains(body, next) {
		t.Fatalf("the first page: want letters %s to %s and a link to the next page (%s):\n%s", seqs[0], seqs[199], next, body)
	}
	page2 := "/console/dlq?cursor=" + seqs[199]
	_, body, _ = g.do(c, "GET", page2, nil)
	if shown(body, seqs[199]) || !shown(body, seqs[200]) || !shown(body, seqs[204]) || strings.Contains(body, "Next page") ||
		!strings.Contains(body, `href="/console/dlq">First page</a>`) {
		t.Fatalf("the second page: want letters %s to %s, a link to the first page and none to a next:\n%s", seqs[200], seqs[204], body)
	}
	status, body, _ := g.do(c, "POST", "/console/dlq/remove", url.Values{"csrf": {csrf}, "seq": {seqs[202]}, "cursor": {seqs[199]}})
	if status != http.StatusOK || !strings.Contains(body, `name="confirm" value="yes"`) || !strings.Contains(body, "letter 202") {
		t.Fatalf("remove of a letter on the second page, unconfirmed = %d; want the page that asks, with the letter:\n%s", status, body)
	}
	status, _, h := g.do(c, "POST", "/console/dlq/remove", url.Values{"csrf": {csrf}, "seq": {seqs[202]}, "cursor": {seqs[199]}, "confirm": {"yes"}})
	if status != http.StatusSeeOther || h.Get("Location") != page2 {
		t.Fatalf("remove = %d to %q, want 303 to %s", status, h.Get("Location"), page2)
	}
	_, body, _ = g.do(c, "GET", page2, nil)
	if shown(body, seqs[202]) || !shown(body, seqs[203]) || !strings.Contains(body, "1 dead letter removed") {
		t.Fatalf("after the removal of %s the second page shows:\n%s", seqs[202], body)
	}
}
