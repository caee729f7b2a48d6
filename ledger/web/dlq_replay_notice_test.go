package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleReplayNoticeCount: the notice after a replay counts the
// letters in good English, as the removal's does: a row's Replay (always
// one letter) said "1 dead letters replayed."; Replay all of two says
// "2 dead letters replayed.".
func TestConsoleReplayNoticeCount(t *testing.T) {
	g, deadLetter := newDLQRig(t)
	publish := func() string { return deadLetter("schema version 7") }
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	replay := func(form url.Values, want string) {
		t.Helper()
		form.Set("csrf", csrf)
		if status, _, _ := g.do(c, "POST", "/console/dlq/replay", form); status != http.StatusSeeOther {
			t.Fatalf("replay %v = %d, want 303", form, status)
		}
		_, body, _ := g.do(c, "GET", "/console/dlq", nil)
		if !strings.Contains(body, want) {
			t.Fatalf("after replay %v the page does not say %q:\n%s", form, want, body)
		}
	}
	replay(url.Values{"seq": {publish()}}, ">1 dead letter replayed.<")
	publish()
	publish()
	replay(url.Values{}, ">2 dead letters replayed.<")
}
