package web_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleRefusedFormKept: a console form the API or the console
// refuses comes back with what was typed in every field, and the error,
// in the words of the field's label, beside the field it is about (which
// is marked invalid, names the error as its description and takes the
// focus). The page said only "rpm_limit: ..." at its top, naming the
// field as the API does and not as the form labels it, and every field
// of the form was empty again: nine fields of a key to type anew for one
// mistake.
func TestConsoleRefusedFormKept(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	cases := []struct {
		action, page string
		form         url.Values
		invalid      string // the invalid input's id
		says, not    string
	}{
		{"/console/customers/" + cu.ID + "/keys", "/console/keys?customer=" + cu.ID,
			url.Values{"name": {"batch jobs"}, "rpm_limit": {"ten"}, "tpm_limit": {"5000"}, "daily_limit": {"2.5"}, "allowed_models": {"sim-pro"}, "form_id": {"f1"}},
			"rpm", `Requests per minute: &#34;ten&#34; is not a whole number above 0`, "rpm_limit"},
		{"/console/customers/" + cu.ID + "/keys", "/console/keys?customer=" + cu.ID, // refused by the API itself
			url.Values{"name": {"nightly"}, "daily_limit": {"-1"}, "monthly_limit": {"40"}, "form_id": {"f2"}},
			"daily", `Daily spend limit: &#34;-1&#34; is negative`, "daily_limit"},
		{"/console/customers/" + cu.ID + "/credits", "/console/customers/" + cu.ID,
			url.Values{"amount": {"1,000"}, "memo": {"invoice 7"}, "idempotency_key": {"k1"}},
			"amount", `Credit amount: &#34;1,000&#34; is not a decimal number`, "amount:"},
		{"/console/prices", "/console/prices",
			url.Values{"model": {"gpt-x"}, "currency": {"EUR"}, "input": {"abc"}, "output": {"12"}, "effective_from": {"2030-01-01T00:00"}},
			"input", `Input: &#34;abc&#34; is not a decimal number`, "input:"},
	}
	for _, tc := range cases {
		f := url.Values{"csrf": {csrf}}
		for k, v := range tc.form {
			f[k] = v
		}
		_, _, h := g.do(c, "POST", tc.action, f)
		if loc := h.Get("Location"); loc != tc.page {
			t.Errorf("POST %s went to %q; want %q", tc.action, loc, tc.page)
			continue
		}
		_, body, _ := g.do(c, "GET", tc.page, nil)
		for k, v := range tc.form {
			if k == "form_id" || k == "idempotency_key" {
				continue
			}
			if !regexp.MustCompile(`name="`+k+`"[^>]* value="`+regexp.QuoteMeta(v[0])+`"`).MatchString(body) &&
				!regexp.MustCompile(`value="`+regexp.QuoteMeta(v[0])+`"[^>]* name="`+k+`"`).MatchString(body) {
				t.Errorf("after POST %s refused, field %s does not hold %q", tc.action, k, v[0])
			}
		}
		input := regexp.MustCompile(`<input id="` + tc.invalid + `"[^>]*>`).FindString(body)
		if !strings.Contains(input, `aria-invalid="true"`) || !strings.Contains(input, `aria-describedby="`+tc.invalid+`-error"`) || !strings.Contains(input, "autofocus") {
			t.Errorf("after POST %s refused, the field it is about is %s; want it invalid, described by its error and focused", tc.action, input)
		}
		m := regexp.MustCompile(`<[a-z]+ [^>]*id="` + tc.invalid + `-error"[^>]*>([^<]*)<`).FindStringSubmatch(body)
		if m == nil || m[1] != tc.says {
			t.Errorf("after POST %s refused, the error beside the field is %q; want %q", tc.action, m, tc.says)
		}
		if strings.Contains(body, `role="alert">`+tc.not) {
			t.Errorf("after POST %s refused, the page names the field %q", tc.action, tc.not)
		}
		// Said once: the page after shows the form empty again.
		_, body, _ = g.do(c, "GET", tc.page, nil)
		if strings.Contains(body, `aria-invalid`) || strings.Contains(body, `value="`+tc.form.Get(tc.invalid)+`"`) && tc.form.Get(tc.invalid) != "" {
			t.Errorf("a second view of %s still shows the refused form", tc.page)
		}
	}
}

// TestConsoleRefusedFormOnlyWhereSent: a refused credit form is shown
// filled in on its own customer's page only: on another customer's page
// (another tab, say) the amount would credit the wrong customer.
func TestConsoleRefusedFormOnlyWhereSent(t *testing.T) {
	g := newRig(t)
	a, _, _ := g.customer("alpha", "sim-pro", 0)
	b, _, _ := g.customer("bravo", "sim-pro", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	g.do(c, "POST", "/console/customers/"+a.ID+"/credits", url.Values{"csrf": {csrf}, "amount": {"12 5"}, "memo": {"for alpha"}})
	_, body, _ := g.do(c, "GET", "/console/customers/"+b.ID, nil)
	if strings.Contains(body, `value="12 5"`) || strings.Contains(body, `value="for alpha"`) || strings.Contains(body, "aria-invalid") {
		t.Errorf("bravo's page shows alpha's refused credit form")
	}
}
