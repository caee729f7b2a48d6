package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPagesSendTheSecurityHeaders: every page of the portal and the
// console, the sign-in pages included, is sent with no-store (a page
// shows a customer's figures, or a key's secret once: no browser or proxy
// keeps it), a policy that forbids framing (frame-ancestors and
// X-Frame-Options) and scripts, and nosniff. A mutation audit: dropping
// no-store, X-Frame-Options or frame-ancestors passed every test.
func TestPagesSendTheSecurityHeaders(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("headers", "none", 0)
	portal, console := g.browser(), g.browser()
	g.signIn(portal, "portal", "key", key)
	g.signIn(console, "console", "token", adminToken)
	for _, p := range []struct {
		c    *http.Client
		path string
	}{{g.browser(), "/portal/signin"}, {portal, "/portal/"}, {portal, "/portal/statements"},
		{g.browser(), "/console/signin"}, {console, "/console/"}, {console, "/console/keys"}} {
		status, _, h := g.do(p.c, "GET", p.path, nil)
		csp := h.Get("Content-Security-Policy")
		if status != http.StatusOK || h.Get("Cache-Control") != "no-store" || h.Get("X-Frame-Options") != "DENY" ||
			h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("GET %s = %d, Cache-Control %q, X-Frame-Options %q, X-Content-Type-Options %q, CSP %q", p.path, status,
				h.Get("Cache-Control"), h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"), csp)
		}
	}
}
