package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestScreenshots writes a PNG of every console and portal page, at a
// laptop's (1280×800) and a phone's (390×844) width, into the directory
// TOLLGATE_SCREENSHOTS names (make screenshots); without it, it skips. The
// ledger holds two weeks of generated usage for three customers.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("TOLLGATE_SCREENSHOTS")
	if dir == "" {
		t.Skip("set TOLLGATE_SCREENSHOTS=DIR to write screenshots (make screenshots)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, nil)
	customers := []string{s.customerID}
	for _, name := range []string{"globex", "initech"} {
		var c struct {
			ID string `json:"id"`
		}
		s.adminDo("POST", "/admin/v1/customers", `{"name":"`+name+`","credit_limit":"50"}`, http.StatusCreated, &c)
		customers = append(customers, c.ID)
	}
	var keyID string
	var keys struct {
		Data []struct{ ID string } `json:"data"`
	}
	s.adminDo("GET", "/admin/v1/customers/"+s.customerID+"/keys", "", http.StatusOK, &keys)
	keyID = keys.Data[0].ID
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/credits", `{"amount":"100","memo":"welcome credit"}`, http.StatusCreated, nil)
	s.adminDo("POST", "/admin/v1/prices", `{"model":"sim-pro","currency":"USD","input":"2","cached_input":"1","output":"8","effective_from":"`+
		time.Now().UTC().AddDate(0, 1, 0).Format("2006-01-02")+`T00:00:00Z"}`, http.StatusCreated, nil)
	// Two weeks of usage for the stack's customer, written as the meter does.
	var events []usage.Event
	now := time.Now().UTC()
	for d := range 14 {
		for i := range 3 + d%4 {
			model := []string{"sim-pro", "sim-small"}[i%2]
			events = append(events, usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(),
				Time: now.AddDate(0, 0, -d).Add(-time.Duration(i) * time.Hour), CustomerID: s.customerID, KeyID: keyID,
				Provider: "sim", Model: model, Endpoint: "/v1/chat/completions", Status: usage.StatusOK, HTTPStatus: 200,
				FinishReason: "stop", UsageSource: usage.SourceUpstream,
				Usage: usage.Tokens{PromptTokens: int64(2000 + 300*i + 50*d), CachedTokens: 500, CompletionTokens: int64(800 + 40*d), ReasoningTokens: 100}})
		}
	}
	if _, err := s.store.WriteEvents(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, id := chat(t, s.gateway, s.secret, "sim-pro")
		s.event(id)
	}

	console, portal := browserTab(t), browserTab(t)
	shots := []struct {
		tab  context.Context
		name string
		url  string
	}{
		{console, "console-signin", s.admin + "/console/signin"},
		{portal, "portal-signin", s.gateway + "/portal/signin"},
	}
	snap := func(tab context.Context, name, url string) {
		for _, size := range []struct {
			suffix string
			w, h   int64
			mobile bool
		}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
			opts := []chromedp.EmulateViewportOption{}
			if size.mobile {
				opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))
			}
			do(t, tab, chromedp.EmulateViewport(size.w, size.h, opts...))
			if url != "" {
				page(t, tab, url)
			}
			png := run(t, tab, chromedp.FullScreenshot(100))
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, size.suffix)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, sh := range shots {
		snap(sh.tab, sh.name, sh.url)
	}
	do(t, console, chromedp.EmulateViewport(1280, 800))
	signInBrowser(t, console, s.admin, "console", "token", testAdminToken)
	signInBrowser(t, portal, s.gateway, "portal", "key", s.secret)
	for _, p := range []struct{ name, url string }{
		{"console-overview", s.admin + "/console/?fresh=1"},
		{"console-customers", s.admin + "/console/customers"},
		{"console-customer", s.admin + "/console/customers/" + s.customerID},
		{"console-keys", s.admin + "/console/keys?customer=" + s.customerID},
		{"console-prices", s.admin + "/console/prices"},
		{"console-reconciliation", s.admin + "/console/reconciliation?fresh=1"},
		{"console-dlq", s.admin + "/console/dlq"},
	} {
		snap(console, p.name, p.url)
	}
	page(t, console, s.admin+"/console/keys?customer="+s.customerID)
	do(t, console, chromedp.SendKeys(chromedp.CSS("#name"), "screenshot key"))
	navigate(t, console, chromedp.Click(chromedp.CSS("#issue button")))
	snap(console, "console-key-issued", "")
	for _, p := range []struct{ name, url string }{
		{"portal-usage", s.gateway + "/portal/"},
		{"portal-requests", s.gateway + "/portal/requests"},
		{"portal-statements", s.gateway + "/portal/statements"},
	} {
		snap(portal, p.name, p.url)
	}
	t.Logf("screenshots in %s", dir)
}
