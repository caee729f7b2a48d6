package web_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleRefusedLimitsKept: a key's limits form refused comes back
// open, filled in as sent, the error beside its field in the label's
// words, as the other forms do (TestConsoleRefusedFormKept). It came back
// closed with the key's stored limits, the operator's edits gone, and
// "daily_limit: …" at the top of the page.
func TestConsoleRefusedLimitsKept(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	k, err := g.api.CreateKey(context.Background(), cu.ID, ledger.KeyInput{Name: "second"})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	_, _, h := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", url.Values{"csrf": {csrf}, "customer": {cu.ID},
		"rpm_limit": {"120"}, "daily_limit": {"abc"}, "allowed_models": {"sim-pro"}})
	_, body, _ := g.do(c, "GET", h.Get("Location"), nil)
	for field, v := range map[string]string{"rpm_limit": "120", "daily_limit": "abc", "allowed_models": "sim-pro"} {
		if !regexp.MustCompile(`id="[a-z]+-` + k.ID + `" name="` + field + `" value="` + v + `"`).MatchString(body) {
			t.Errorf("the refused limits form's %s does not hold %q", field, v)
		}
	}
	if !regexp.MustCompile(`<details open><summary aria-label="Set limits of key second`).MatchString(body) {
		t.Errorf("the refused limits form is not open")
	}
	input := regexp.MustCompile(`<input id="daily-` + k.ID + `"[^>]*>`).FindString(body)
	if !strings.Contains(input, `aria-invalid="true"`) || !strings.Contains(input, `aria-describedby="daily-`+k.ID+`-error"`) {
		t.Errorf("the daily limit's input is %s; want it invalid and described by its error", input)
	}
	if want := `<p class="field-error" id="daily-` + k.ID + `-error">Daily spend limit: &#34;abc&#34; is not a decimal number</p>`; !strings.Contains(body, want) {
		t.Errorf("the page lacks %s", want)
	}
}
