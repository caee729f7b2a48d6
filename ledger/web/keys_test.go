package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// setSQL runs one statement on the rig's database (what no API makes).
func (g *rig) setSQL(sql string, args ...any) {
	g.t.Helper()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, g.dbURL)
	if err != nil {
		g.t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, sql, args...); err != nil {
		g.t.Fatal(err)
	}
}

// TestConsoleShowsExpiredKeys: a key whose expires_at has passed was shown
// "active" on the keys page and the customer page (only revoked_at was
// looked at); the gateway refuses it. It is shown "expired".
func TestConsoleShowsExpiredKeys(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("lapsed", "none", 0)
	g.setSQL(`UPDATE api_keys SET expires_at = now() - interval '1 day' WHERE customer_id = $1`, cu.ID)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	status := regexp.MustCompile(`<span class="(ok|bad)">([a-z]+)`)
	for _, p := range []string{"/console/keys?customer=" + cu.ID, "/console/customers/" + cu.ID} {
		code, body, _ := g.do(c, "GET", p, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", p, code)
		}
		m := status.FindAllStringSubmatch(body[strings.Index(body, `id="keys"`):], -1)
		if len(m) != 1 || m[0][1] != "bad" || m[0][2] != "expired" {
			t.Errorf("GET %s: the key's status is %q, want one, expired", p, m)
		}
	}
}
