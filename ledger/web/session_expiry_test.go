package web_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/web"
)

// TestPortalSessionExpires: a portal session lasts its TTL (8 hours) from
// sign-in, then its cookie no longer signs anyone in: the page sends the
// browser to the sign-in page. A mutation audit: sessions that never
// expired passed every test, so a cookie copied off a shared computer
// read its customer's usage for as long as the process lived.
func TestPortalSessionExpires(t *testing.T) {
	var ahead atomic.Int64 // how far the sessions' clock runs ahead
	g := newRigWith(t, func(p *web.Portal) {
		web.SetSessionClock(p, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	})
	_, secret, _ := g.customer("expiring", "none", 0)
	c := g.browser()
	g.signIn(c, "portal", "key", secret)
	if status, body, _ := g.do(c, "GET", "/portal/", nil); status != http.StatusOK {
		t.Fatalf("the portal signed in = %d %s", status, body)
	}
	ahead.Store(int64(7 * time.Hour))
	if status, body, _ := g.do(c, "GET", "/portal/", nil); status != http.StatusOK {
		t.Fatalf("the portal 7 hours after sign-in = %d %s", status, body)
	}
	ahead.Store(int64(8*time.Hour + time.Minute))
	status, _, h := g.do(c, "GET", "/portal/", nil)
	if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/portal/signin") {
		t.Errorf("the portal 8 hours after sign-in = %d, Location %q; want 303 to the sign-in page", status, h.Get("Location"))
	}
}
