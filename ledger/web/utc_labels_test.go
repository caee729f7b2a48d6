package web_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleTimesSayUTC: every time the console's customer and keys
// pages show says it is UTC, beside it or in its column's header, as the
// price book, the overview and the portal's request log do: an operator
// whose browser is at UTC−10 (America/Adak) or UTC+14
// (Pacific/Kiritimati) read "created 2026-12-05 13:54", a key's "Last
// used" and "expired …" and an entry's "Effective" as local times.
func TestConsoleTimesSayUTC(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("acme", "sim-pro", 1)
	exp := time.Now().Add(48 * time.Hour).UTC()
	if _, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "soon", ExpiresAt: &exp}); err != nil {
		t.Fatal(err)
	}
	gone, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.api.RevokeKey(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := g.api.AddEntry(ctx, cu.ID, ledger.KindCredit, ledger.EntryInput{Amount: "5"}); err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	at := regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}`)
	cell := regexp.MustCompile(`(?s)<table id="([a-z]+)"[^>]*>\s*<thead>(.*?)</thead>(.*?)</table>`)
	th := regexp.MustCompile(`<th[^>]*>([^<]*)</th>`)
	td := regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	for _, path := range []string{"/console/customers/" + cu.ID, "/console/keys?customer=" + cu.ID} {
		_, body, _ := g.do(c, "GET", path, nil)
		body = body[strings.Index(body, "<main"):]
		// In tables: the column's header, or the cell itself, says UTC.
		for _, tm := range cell.FindAllStringSubmatch(body, -1) {
			heads := th.FindAllStringSubmatch(tm[2], -1)
			for _, row := range strings.Split(tm[3], "</tr>") {
				for i, d := range td.FindAllStringSubmatch(row, -1) {
					if i >= len(heads) || !at.MatchString(d[1]) {
						continue
					}
					if !strings.Contains(heads[i][1], "UTC") {
						for _, s := range at.FindAllStringIndex(d[1], -1) {
							if !strings.HasPrefix(d[1][s[1]:], " UTC") {
								t.Errorf("%s: table %s, column %q shows %q with no word of UTC", path, tm[1], heads[i][1], d[1][s[0]:s[1]])
							}
						}
					}
				}
			}
		}
		// Outside tables: " UTC" follows.
		rest := cell.ReplaceAllString(body, "")
		for _, s := range at.FindAllStringIndex(rest, -1) {
			if !strings.HasPrefix(rest[s[1]:], " UTC") {
				t.Errorf("%s: %q is shown with no word of UTC: …%s…", path, rest[s[0]:s[1]], rest[max(0, s[0]-40):s[1]])
			}
		}
	}
}
