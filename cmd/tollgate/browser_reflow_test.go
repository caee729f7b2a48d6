package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserConsoleRevokeLongKeyNameFits: the page that asks before a key
// is revoked, for a key whose name is 200 characters with no space, fits a
// phone's screen (375 CSS px) and a laptop's at 200% zoom (640): the
// confirming button and the Cancel link beside it are on the screen. The
// button, "Revoke" and the name on one line, made the page 1,663 px wide
// at 375, Cancel off to the right.
func TestBrowserConsoleRevokeLongKeyNameFits(t *testing.T) {
	tab := browserTab(t)
	s := newStack(t, nil)
	name := strings.Repeat("k", 200)
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"`+name+`"}`, http.StatusCreated, nil)
	signInBrowser(t, tab, s.admin, "console", "token", testAdminToken)
	defer do(t, tab, chromedp.EmulateReset())
	for _, width := range []int64{375, 640} {
		do(t, tab, chromedp.EmulateViewport(width, 800))
		page(t, tab, s.admin+"/console/keys?customer="+s.customerID)
		navigate(t, tab, chromedp.Click(chromedp.CSS(`button.danger[aria-label^="Revoke key kkk"]`)))
		type fit struct {
			Viewport, Page, Button, Cancel float64
		}
		f := run(t, tab, chromedp.Evaluate[fit](`(() => ({viewport: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
			button: document.querySelector('#confirm-revoke').getBoundingClientRect().right,
			cancel: document.querySelector('#confirm-revoke ~ a').getBoundingClientRect().right}))()`))
		if f.Page > f.Viewport || f.Button > f.Viewport || f.Cancel > f.Viewport {
			t.Errorf("at %d px the revoke page is %v px wide; the button ends at %v px, Cancel at %v", width, f.Page, f.Button, f.Cancel)
		}
	}
}
