package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// limitsNotice is the notice (or the error) the keys page shows after a
// limits form's POST answered with a redirect.
func (g *rig) limitsNotice(c *http.Client, h http.Header) (notice, failure, body string) {
	g.t.Helper()
	_, body, _ = g.do(c, "GET", h.Get("Location"), nil)
	return between(body, `<p class="notice" role="status">`, "</p>"), between(body, `<p class="error" id="error" role="alert">`, "</p>"), body
}

// TestConsoleLimitsSendOnlyWhatChanged: the limits form sent every field,
// so a save that changed only the requests per minute also set both
// spend limits, which takes the ledger's key spend lock: behind a long
// meter batch the save failed ("could not be changed now") though no
// spend limit was touched. A field left as the page showed it is not
// sent, and the notice says what changed.
func TestConsoleLimitsSendOnlyWhatChanged(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("locked", "none", 0)
	daily := "25"
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "busy", DailyLimit: &daily})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	form := limitsForm(t, body, k.ID)
	form.Set("rpm_limit", "120")

	// A meter batch holds the key spend lock (shared) for longer than a
	// limit change waits for it.
	db, err := pgx.Connect(ctx, g.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtext('tollgate key spend'))`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	status, _, h := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form)
	if status != http.StatusSeeOther {
		t.Fatalf("set limits = %d", status)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("an rpm change waited %v (for the spend lock)", d)
	}
	notice, failure, _ := g.limitsNotice(c, h)
	if failure != "" {
		t.Errorf("an rpm change behind a meter batch failed: %s", failure)
	}
	if want := "Limits of key " + k.Prefix + "… saved: requests per minute none → 120."; notice != want {
		t.Errorf("notice %q, want %q", notice, want)
	}
	got, err := g.api.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RPMLimit == nil || *got.RPMLimit != 120 || got.DailyLimit == nil || *got.DailyLimit != "25" {
		t.Errorf("after an rpm change: rpm %v, daily %v; want 120 and 25", got.RPMLimit, got.DailyLimit)
	}
	_ = tx.Rollback(ctx)

	// A form sent as shown changes nothing, and says so.
	_, body, _ = g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	if _, _, h = g.do(c, "POST", "/console/keys/"+k.ID+"/limits", limitsForm(t, body, k.ID)); h.Get("Location") == "" {
		t.Fatal("no redirect")
	}
	if notice, failure, _ := g.limitsNotice(c, h); failure != "" || notice != "Nothing to save: the limits of key "+k.Prefix+"… are as shown." {
		t.Errorf("a form sent as shown: notice %q, error %q", notice, failure)
	}
}

// TestConsoleLimitsNoLostUpdate: two operators (or an operator and the
// API) change a key's limits from pages shown before either saved. The
// limits form sent every field back, so the second save silently put
// back what the first had changed. A field the second operator did not
// touch keeps the other's change; a field both changed is refused, the
// page showing both values, and saved only when sent again.
func TestConsoleLimitsNoLostUpdate(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("shared", "none", 0)
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "both"})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	form := limitsForm(t, body, k.ID)

	// Meanwhile another operator sets a daily limit and 300 rpm.
	daily := "40.5"
	if _, err := g.api.UpdateKey(ctx, k.ID, ledger.KeyPatch{DailyLimit: ledger.Of(daily), RPMLimit: ledger.Of[int64](300)}); err != nil {
		t.Fatal(err)
	}
	// This operator changes the tokens per minute only.
	form.Set("tpm_limit", "5000")
	_, _, h := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form)
	if _, failure, _ := g.limitsNotice(c, h); failure != "" {
		t.Fatalf("a tpm change: %s", failure)
	}
	got, _ := g.api.Key(ctx, k.ID)
	if got.DailyLimit == nil || *got.DailyLimit != daily || got.RPMLimit == nil || *got.RPMLimit != 300 || got.TPMLimit == nil || *got.TPMLimit != 5000 {
		t.Fatalf("after the second operator's tpm change: daily %v, rpm %v, tpm %v; want 40.5, 300, 5000", got.DailyLimit, got.RPMLimit, got.TPMLimit)
	}

	// Both change the requests per minute: the form's change is refused,
	// the page showing the value now stored and the one sent.
	form.Set("rpm_limit", "120")
	_, _, h = g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form)
	_, failure, body := g.limitsNotice(c, h)
	if !strings.Contains(failure, "Requests per minute was changed to 300 since this page was shown (it showed none)") ||
		!strings.Contains(failure, "120") {
		t.Errorf("a conflicting rpm change: error %q, want it to name 300, none and 120", failure)
	}
	if got, _ := g.api.Key(ctx, k.ID); got.RPMLimit == nil || *got.RPMLimit != 300 {
		t.Fatalf("the conflicting change was saved: rpm %v", got.RPMLimit)
	}
	// The form comes back with what was typed, the other change shown:
	// sent again as it is, it saves the operator's 120 and nothing else.
	again := limitsForm(t, body, k.ID)
	if again.Get("rpm_limit") != "120" || again.Get("daily_limit") != daily || again.Get("tpm_limit") != "5000" {
		t.Errorf("the refused form holds rpm %q, daily %q, tpm %q; want 120, 40.5, 5000",
			again.Get("rpm_limit"), again.Get("daily_limit"), again.Get("tpm_limit"))
	}
	_, _, h = g.do(c, "POST", "/console/keys/"+k.ID+"/limits", again)
	if notice, failure, _ := g.limitsNotice(c, h); failure != "" || notice != "Limits of key "+k.Prefix+"… saved: requests per minute 300 → 120." {
		t.Errorf("sent again: notice %q, error %q", notice, failure)
	}
	if got, _ := g.api.Key(ctx, k.ID); got.RPMLimit == nil || *got.RPMLimit != 120 || got.DailyLimit == nil || *got.DailyLimit != daily {
		t.Errorf("sent again: rpm %v, daily %v; want 120, 40.5", got.RPMLimit, got.DailyLimit)
	}
}

// TestConsoleLimitsBehindABatchKept: a spend limit change that waited for
// the meter's batches past the ledger's bound (503, "try again") came
// back as an error alone, the form closed with the stored limits and the
// operator's edits gone. It comes back open, as it was typed, to send
// again.
func TestConsoleLimitsBehindABatchKept(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("waiting", "none", 0)
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "waits"})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	form := limitsForm(t, body, k.ID)
	form.Set("daily_limit", "12.5")
	form.Set("rpm_limit", "90")
	db, err := pgx.Connect(ctx, g.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtext('tollgate key spend'))`); err != nil {
		t.Fatal(err)
	}
	_, _, h := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form)
	_ = tx.Rollback(ctx)
	_, failure, body := g.limitsNotice(c, h)
	if !strings.Contains(failure, "try again") {
		t.Errorf("a daily limit behind a batch: error %q", failure)
	}
	kept := limitsForm(t, body, k.ID)
	if kept.Get("daily_limit") != "12.5" || kept.Get("rpm_limit") != "90" || !strings.Contains(body, `<details open><summary aria-label="Set limits of key waits`) {
		t.Errorf("the form came back holding daily %q, rpm %q (open: %v); want it open, as typed", kept.Get("daily_limit"), kept.Get("rpm_limit"),
			strings.Contains(body, "<details open>"))
	}
	// Sent again, it is saved.
	_, _, h = g.do(c, "POST", "/console/keys/"+k.ID+"/limits", kept)
	if notice, failure, _ := g.limitsNotice(c, h); failure != "" || !strings.Contains(notice, "daily spend limit none → 12.5") {
		t.Errorf("sent again: notice %q, error %q", notice, failure)
	}
}
