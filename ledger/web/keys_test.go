package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
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

// limitsForm returns the fields of key id's "Set limits" form on the keys
// page body, as a browser would send them.
func limitsForm(t *testing.T, body, id string) url.Values {
	t.Helper()
	start := strings.Index(body, `action="/console/keys/`+id+`/limits"`)
	if start < 0 {
		t.Fatalf("no limits form for key %s:\n%s", id, body)
	}
	form := body[start : start+strings.Index(body[start:], "</form>")]
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input[^>]*\sname="([^"]+)"[^>]*\svalue="([^"]*)"`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// TestConsoleSetLimitsKeepsTheExpiry: the "Set limits" form showed the
// expiry to the minute and sent every field back, so saving an rpm change
// moved a key's expiry from 10:30:45 to 10:30:00. An expiry left as shown
// is left as stored; one edited is set, to the second.
func TestConsoleSetLimitsKeepsTheExpiry(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("expiring", "none", 0)
	exp := time.Date(time.Now().Year()+1, 3, 4, 10, 30, 45, 123456000, time.UTC)
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "exp", ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	form := limitsForm(t, body, k.ID)
	form.Set("rpm_limit", "60")
	if status, _, _ := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form); status != http.StatusSeeOther {
		t.Fatalf("set limits = %d", status)
	}
	got, err := g.api.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RPMLimit == nil || *got.RPMLimit != 60 || got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) {
		t.Fatalf("after an rpm change: rpm %v, expires %v, want 60 and %v", got.RPMLimit, got.ExpiresAt, exp)
	}
	// An expiry edited to the second is set to the second.
	_, body, _ = g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	form = limitsForm(t, body, k.ID)
	if want := exp.Format("2006-01-02T15:04:05"); form.Get("expires_at") != want {
		t.Errorf("the form shows the expiry %q, want %q", form.Get("expires_at"), want)
	}
	later := exp.Truncate(time.Second).Add(time.Hour + 10*time.Second)
	form.Set("expires_at", later.Format("2006-01-02T15:04:05"))
	if status, _, _ := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form); status != http.StatusSeeOther {
		t.Fatalf("set limits = %d", status)
	}
	if got, err = g.api.Key(ctx, k.ID); err != nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(later) {
		t.Fatalf("after an expiry change: expires %v (%v), want %v", got.ExpiresAt, err, later)
	}
}

// TestConsoleTooLargeLimitSaysSo: a tpm_limit of 99999999999999999999 was
// refused as "not a whole number above 0". It is too large, and the page
// says so with the most the ledger takes.
func TestConsoleTooLargeLimitSaysSo(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("greedy", "none", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	for _, f := range []struct{ field, value, most, label string }{
		{"tpm_limit", "99999999999999999999", "1,099,511,627,776", "Tokens per minute"},
		{"rpm_limit", "1099511627777", "1,099,511,627,776", "Requests per minute"},
		{"max_concurrent", "9223372036854775808", "2,147,483,647", "Requests at once"},
	} {
		status, _, h := g.do(c, "POST", "/console/customers/"+cu.ID+"/keys", url.Values{"csrf": {csrf}, "name": {"k"}, f.field: {f.value}})
		if status != http.StatusSeeOther {
			t.Fatalf("issue with %s=%s = %d", f.field, f.value, status)
		}
		_, body, _ := g.do(c, "GET", h.Get("Location"), nil)
		want := f.label + ": &#34;" + f.value + "&#34; is too large: the most is " + f.most
		if !strings.Contains(body, want) {
			t.Errorf("%s=%s: the page lacks %q:\n%s", f.field, f.value, want, body[strings.Index(body, "<main"):])
		}
	}
	if ks, err := g.api.Keys(context.Background(), cu.ID); err != nil || len(ks) != 1 {
		t.Errorf("keys = %d (%v), want the first one only", len(ks), err)
	}
}

// TestConsolePastExpirySaysTheKeyIsRefused: an expiry set in the past is
// kept (it suspends the key until a later one is set) but the page said
// only "saved", while the gateway now refused the key: it says so.
func TestConsolePastExpirySaysTheKeyIsRefused(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("suspended", "none", 0)
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	save := func(expiry string) string {
		_, body, _ := g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
		form := limitsForm(t, body, k.ID)
		form.Set("expires_at", expiry)
		if status, _, _ := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", form); status != http.StatusSeeOther {
			t.Fatalf("set limits = %d", status)
		}
		_, body, _ = g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
		return between(body, `<p class="notice" role="status">`, "</p>")
	}
	if n := save("2020-01-02"); !strings.Contains(n, "Its expiry, 2020-01-02 00:00 UTC, has passed: the key is refused from now on") {
		t.Errorf("after a past expiry the notice is %q, want it to say the key is refused", n)
	}
	later := time.Now().AddDate(1, 0, 0).Format("2006-01-02")
	if n, want := save(later), "Limits of key "+k.Prefix+"… saved: expiry 2020-01-02 00:00:00 UTC → "+later+" 00:00:00 UTC."; n != want {
		t.Errorf("after a later expiry the notice is %q, want %q (what changed, and no more)", n, want)
	}
}
