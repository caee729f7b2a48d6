package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// consoleErrors collects what tab's pages log as errors (the console's
// errors, uncaught exceptions, refused resources) from now on.
func consoleErrors(t *testing.T, tab context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	if err := chromedp.Listen(tab, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				errs = append(errs, fmt.Sprintf("%s: %s", e.Entry.URL, e.Entry.Text))
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				errs = append(errs, "console.error")
			}
		case *runtime.EventExceptionThrown:
			errs = append(errs, e.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, enable := range []cdp.Command[cdp.Empty, cdp.Empty]{log.Enable, runtime.Enable} {
		if _, err := chromedp.Call(tab, enable, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// TestBrowserConsoleKeyboardRefusedForm issues a key in chromium with the
// keyboard alone: Tab from the top of the page to the form (every stop
// outlined), type, Enter. The form refused (a rate that is no number)
// comes back with what was typed, the focus on the field at fault and the
// error beside it in the label's words; corrected and sent again with
// Enter, the key is issued. No page logs an error. The form came back
// empty, the focus nowhere, the error at the top naming "rpm_limit"; and
// every console page logged an error, its /favicon.ico not found.
func TestBrowserConsoleKeyboardRefusedForm(t *testing.T) {
	tab := browserTab(t)
	s := newStack(t, nil)
	errs := consoleErrors(t, tab)
	signInBrowser(t, tab, s.admin, "console", "token", testAdminToken)
	page(t, tab, s.admin+"/console/keys?customer="+s.customerID)

	type focus struct {
		ID, Tag string
		Outline string
	}
	focused := func() focus {
		return run(t, tab, chromedp.Evaluate[focus](`(() => { const e = document.activeElement;
			return {id: e.id, tag: e.tagName, outline: getComputedStyle(e).outlineStyle}; })()`))
	}
	var stops []string
	for f := focused(); f.ID != "name"; f = focused() {
		if len(stops) > 40 {
			t.Fatalf("40 Tabs did not reach the issue form's name: %q", stops)
		}
		do(t, tab, chromedp.KeyEvent(kb.Tab))
		f = focused()
		stops = append(stops, f.Tag+"#"+f.ID)
		if f.Tag != "BODY" && f.Outline == "none" {
			t.Errorf("Tab stop %s#%s shows no outline", f.Tag, f.ID)
		}
	}
	do(t, tab, chromedp.KeyEvent("batch jobs"+kb.Tab+"ten"+kb.Tab+"5000"))
	navigate(t, tab, chromedp.KeyEvent(kb.Enter))
	// autofocus is applied at a rendering update after the page's load,
	// which the navigation's end may come before (seen once in CI).
	f := focused()
	for deadline := time.Now().Add(5 * time.Second); f.ID != "rpm" && time.Now().Before(deadline); f = focused() {
		time.Sleep(20 * time.Millisecond)
	}
	if f.ID != "rpm" {
		t.Errorf("after the form was refused, the focus is on %s#%s; want the requests per minute (#rpm)", f.Tag, f.ID)
	}
	for sel, want := range map[string]string{"#name": "batch jobs", "#rpm": "ten", "#tpm": "5000"} {
		if got := run(t, tab, chromedp.Value(chromedp.CSS(sel))); got != want {
			t.Errorf("after the form was refused, %s holds %q; want %q", sel, got, want)
		}
	}
	if got := run(t, tab, chromedp.Evaluate[string](`(() => { const e = document.getElementById(document.activeElement.getAttribute('aria-describedby') || '-');
		return e ? e.textContent : ''; })()`)); got != `Requests per minute: "ten" is not a whole number above 0` {
		t.Errorf("the focused field is described by %q", got)
	}
	// Corrected with the keyboard and sent again.
	do(t, tab, chromedp.KeyEvent(kb.End+kb.Backspace+kb.Backspace+kb.Backspace+"60"))
	navigate(t, tab, chromedp.KeyEvent(kb.Enter))
	if secret := text(t, tab, "#secret"); !strings.HasPrefix(secret, "tg-") {
		t.Fatalf("the corrected form did not issue a key: %q", text(t, tab, "main"))
	}
	if e := errs(); len(e) != 0 {
		t.Errorf("the pages logged errors: %q", e)
	}
}
