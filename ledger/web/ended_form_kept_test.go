package web_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// fieldHolds reports whether page has an input named name whose value is
// value (HTML-escaped), its attributes in either order.
func fieldHolds(page, name, value string) bool {
	esc := regexp.QuoteMeta(html.EscapeString(value))
	return regexp.MustCompile(`name="`+name+`"[^>]* value="`+esc+`"`).MatchString(page) ||
		regexp.MustCompile(`value="`+esc+`"[^>]* name="`+name+`"`).MatchString(page)
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// signInFromHere posts the console's sign-in form as a browser does from
// the console's own page: with its Origin.
func signInFromHere(t *testing.T, g *rig, c *http.Client, form url.Values) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.url+"/console/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", g.url)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestConsoleFormAfterSessionEndedKeepsInput: a console form sent after
// the session ended (8 hours after sign-in, or a restart of the server) is
// not acted on, and the sign-in page says so; signed in again there, the
// page the form was on shows the form filled in as it was typed, saying it
// was not sent, ready to send again; so it does after a mistyped token on
// the way. It came back empty: the eight fields
// of a key, or the eleven of a price version, typed again from memory.
func TestConsoleFormAfterSessionEndedKeepsInput(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	keys, _ := g.api.Keys(t.Context(), cu.ID)
	cases := []struct {
		action, page string
		form         url.Values
	}{
		{"/console/customers/" + cu.ID + "/keys", "/console/keys?customer=" + cu.ID,
			url.Values{"name": {"batch <jobs>"}, "rpm_limit": {"60"}, "tpm_limit": {"5000"}, "daily_limit": {"2.5"}, "allowed_models": {"sim-pro"}, "form_id": {"f1"}}},
		{"/console/customers/" + cu.ID + "/credits", "/console/customers/" + cu.ID,
			url.Values{"amount": {"1000"}, "memo": {"invoice \"7\""}, "idempotency_key": {"k1"}}},
		{"/console/prices", "/console/prices",
			url.Values{"model": {"gpt-x"}, "currency": {"EUR"}, "input": {"1.25"}, "output": {"12"}, "effective_from": {"2030-01-01T00:00"}}},
		{"/console/keys/" + keys[0].ID + "/limits", "/console/keys?customer=" + cu.ID,
			url.Values{"customer": {cu.ID}, "cursor": {""}, "rpm_limit": {"77"}, "tpm_limit": {"8800"}, "expires_at_shown": {""}, "expires_at": {"2031-02-03"}}},
	}
	for _, tc := range cases {
		c := g.browser()
		csrf := g.signIn(c, "console", "token", adminToken)
		g.do(c, "POST", "/console/signout", url.Values{"csrf": {csrf}})
		f := url.Values{"csrf": {csrf}}
		for k, v := range tc.form {
			f[k] = v
		}
		req, _ := http.NewRequest("POST", g.url+tc.action, strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Referer", g.url+tc.page)
		req.Header.Set("Origin", g.url)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("POST %s signed out = %d %s", tc.action, resp.StatusCode, b)
		}
		// Signed in with the sign-in page's form as it is, hidden fields
		// and all: first with a typo, then with the token.
		hidden := func(page string) url.Values {
			v := url.Values{}
			for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
				v.Add(m[1], html.UnescapeString(m[2]))
			}
			return v
		}
		signin := hidden(string(b))
		signin.Set("token", adminToken+"x")
		status, page, _ := signInFromHere(t, g, c, signin)
		if status != http.StatusUnauthorized {
			t.Fatalf("a wrong token = %d %s", status, page)
		}
		signin = hidden(page)
		signin.Set("token", adminToken)
		status, _, h := signInFromHere(t, g, c, signin)
		if status != http.StatusSeeOther || h.Get("Location") != tc.page {
			t.Errorf("signed in again after POST %s: %d to %q; want 303 to %s", tc.action, status, h.Get("Location"), tc.page)
			continue
		}
		_, body, _ := g.do(c, "GET", tc.page, nil)
		for k, v := range tc.form {
			if k == "form_id" || k == "customer" || k == "cursor" || k == "expires_at_shown" {
				continue
			}
			if !fieldHolds(body, k, v[0]) {
				t.Errorf("signed in again after POST %s, field %s does not hold %q", tc.action, k, v[0])
			}
		}
		if !strings.Contains(body, "was not sent") {
			t.Errorf("signed in again after POST %s, the page does not say the form was not sent", tc.action)
		}
	}
	// Nothing was done: no key, credit or price version.
	if ks, _ := g.api.Keys(t.Context(), cu.ID); len(ks) != 1 {
		t.Errorf("the customer has %d keys; want 1", len(ks))
	}
	if bal, _ := g.api.Balance(t.Context(), cu.ID); bal.Credits != "0" {
		t.Errorf("the customer has credits %s; want 0", bal.Credits)
	}
}

// TestConsoleFormFromAnotherSiteNotKept: a form another site posts to the
// console (the browser sends no cookie across sites, so it meets the
// "session ended" sign-in page), or to its sign-in with a form to carry,
// is not carried through the sign-in: signed
// in there, the operator would find the other site's amount in the credit
// form, said to be theirs, to send again.
func TestConsoleFormFromAnotherSiteNotKept(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	for _, origin := range []string{"http://evil.example", ""} {
		c := g.browser()
		form := url.Values{"csrf": {"x"}, "amount": {"9999"}, "memo": {"from elsewhere"}}
		req, _ := http.NewRequest("POST", g.url+"/console/customers/"+cu.ID+"/credits", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Referer", g.url+"/console/customers/"+cu.ID)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "9999") || strings.Contains(string(b), `name="resume`) {
			t.Errorf("a credit form posted with Origin %q: the sign-in page carries it:\n%s", origin, b)
		}
		// Nor one posted to the sign-in itself, as its page would carry it.
		form = url.Values{"token": {""}, "resume_path": {"/console/customers/" + cu.ID + "/credits"}, "resume": {"amount=9999"}}
		req, _ = http.NewRequest("POST", g.url+"/console/signin", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if resp, err = c.Do(req); err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "9999") {
			t.Errorf("a sign-in form posted with Origin %q carrying a credit form: the page carries it on", origin)
		}
	}
}
