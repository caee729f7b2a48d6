package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleRemoveDeadLetter: each dead letter's row has a Remove button
// beside Replay; it asks first (removed usage is lost for good), removes
// only once confirmed, with the session's CSRF token, and leaves the
// other letters.
func TestConsoleRemoveDeadLetter(t *testing.T) {
	ctx := context.Background()
	g, deadLetter := newDLQRig(t)
	var seqs []string
	for _, reason := range []string{"schema version 7", "schema version 8"} {
		seqs = append(seqs, deadLetter(reason))
	}
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/dlq", nil)
	if !strings.Contains(body, `action="/console/dlq/remove"`) || !strings.Contains(body, "Remove dead letter "+seqs[0]) {
		t.Fatalf("the dead-letter page has no remove form per letter:\n%s", body)
	}
	left := func() int {
		ls, err := g.api.DeadLetters(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(ls)
	}
	if status, _, _ := g.do(c, "POST", "/console/dlq/remove", url.Values{"seq": {seqs[0]}, "confirm": {"yes"}}); status != http.StatusForbidden || left() != 2 {
		t.Fatalf("remove without the CSRF token = %d, %d letters left; want 403 and 2", status, left())
	}
	status, body, _ := g.do(c, "POST", "/console/dlq/remove", url.Values{"csrf": {csrf}, "seq": {seqs[0]}})
	if status != http.StatusOK || !strings.Contains(body, `name="confirm" value="yes"`) || !strings.Contains(body, "schema version 7") || left() != 2 {
		t.Fatalf("remove, unconfirmed = %d, %d letters left; want the page that asks and 2:\n%s", status, left(), body)
	}
	if status, _, _ := g.do(c, "POST", "/console/dlq/remove", url.Values{"csrf": {csrf}, "seq": {seqs[0]}, "confirm": {"yes"}}); status != http.StatusSeeOther {
		t.Fatalf("remove = %d, want 303", status)
	}
	_, body, _ = g.do(c, "GET", "/console/dlq", nil)
	if strings.Contains(body, "schema version 7") || !strings.Contains(body, "schema version 8") || !strings.Contains(body, "1 dead letter removed") {
		t.Fatalf("after the removal of %s the page shows:\n%s", seqs[0], body)
	}
}
