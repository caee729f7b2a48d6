package main

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestBrowserConsoleLimitsTwoOperators: two operators, each in a browser
// of their own, open the same key's limits form; the first saves a new
// rate, then the second, from the page loaded before, a daily spend
// limit. The second save kept the first's rate (the form sent only the
// field changed), and says what it changed. Both then change the rate
// from pages loaded before either saved: the second is refused, the page
// naming both rates with the form open and kept, and saved when sent
// again.
func TestBrowserConsoleLimitsTwoOperators(t *testing.T) {
	a, b := browserTab(t), browserTab(t)
	s := newStack(t, nil)
	cl := api.NewClient(s.admin, testAdminToken, nil)
	ctx := context.Background()
	keys, err := cl.Keys(ctx, s.customerID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %v, %v", keys, err)
	}
	id := keys[0].ID
	keysPage := s.admin + "/console/keys?customer=" + s.customerID
	for _, tab := range []context.Context{a, b} {
		signInBrowser(t, tab, s.admin, "console", "token", testAdminToken)
		page(t, tab, keysPage)
	}
	// set opens the key's limits form in tab, sets field (the input's
	// id, without the key's) to v, and saves.
	set := func(tab context.Context, field, v string) {
		t.Helper()
		do(t, tab, chromedp.Evaluate[chromedp.Void](`document.querySelector("#key-`+id+` details").open = true`),
			chromedp.SetValue(chromedp.CSS("#"+field+"-"+id), v))
		navigate(t, tab, chromedp.Click(chromedp.CSS(`#key-`+id+` form[action$="/limits"] button[type=submit]`)))
	}
	set(a, "rpm", "120")
	set(b, "daily", "7.5")
	if n := text(t, b, "p.notice"); !strings.Contains(n, "saved: daily spend limit none → 7.5.") {
		t.Errorf("the second operator's notice is %q", n)
	}
	k, err := cl.Key(ctx, id)
	if err != nil || k.RPMLimit == nil || *k.RPMLimit != 120 || k.DailyLimit == nil || *k.DailyLimit != "7.5" {
		t.Fatalf("after both saves: %+v (%v); want rpm 120 (the first's) and daily 7.5 (the second's)", k, err)
	}

	// Both change the rate from pages loaded before either saved.
	page(t, a, keysPage)
	page(t, b, keysPage)
	set(a, "rpm", "300")
	set(b, "rpm", "60")
	if e := text(t, b, "#error"); !strings.Contains(e, "Requests per minute was changed to 300 since this page was shown (it showed 120); you entered 60") {
		t.Errorf("the second operator's error is %q", e)
	}
	if k, _ := cl.Key(ctx, id); k.RPMLimit == nil || *k.RPMLimit != 300 {
		t.Fatalf("the refused change was saved: %+v", k)
	}
	if v := run(t, b, chromedp.Value(chromedp.CSS("#rpm-"+id))); v != "60" {
		t.Errorf("the refused form holds the rate %q; want 60, as typed", v)
	}
	navigate(t, b, chromedp.Click(chromedp.CSS(`#key-`+id+` form[action$="/limits"] button[type=submit]`)))
	if n := text(t, b, "p.notice"); !strings.Contains(n, "saved: requests per minute 300 → 60.") {
		t.Errorf("sent again, the notice is %q", n)
	}
	var after ledger.Key
	if after, err = cl.Key(ctx, id); err != nil || after.RPMLimit == nil || *after.RPMLimit != 60 || after.DailyLimit == nil || *after.DailyLimit != "7.5" {
		t.Errorf("sent again: %+v (%v); want rpm 60, daily 7.5", after, err)
	}
}
