package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// cssRule reports whether the style sheet has a rule whose selector list
// holds selector and whose declarations hold every one of decls.
func cssRule(css, selector string, decls ...string) bool {
	for _, m := range regexp.MustCompile(`([^{}]+)\{([^{}]*)\}`).FindAllStringSubmatch(css, -1) {
		sel := m[1]
		if i := strings.LastIndex(sel, "*/"); i >= 0 {
			sel = sel[i+2:]
		}
		var has bool
		for _, s := range strings.Split(sel, ",") {
			has = has || strings.TrimSpace(s) == selector
		}
		for _, d := range decls {
			has = has && strings.Contains(m[2], d)
		}
		if has {
			return true
		}
	}
	return false
}

// TestLongNamesWrap: a 252-character customer name with no space made the
// customer page 4,026 px wide (its h1 did not wrap) and pushed the
// customers table's columns out of view (names were first cells, which
// do not wrap). Headings and name cells wrap anywhere.
func TestLongNamesWrap(t *testing.T) {
	g := newRig(t)
	name := strings.Repeat("x", 252)
	cu, err := g.api.CreateCustomer(context.Background(), ledger.CustomerInput{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, css, _ := g.do(c, "GET", "/console/static/style.css", nil)
	for _, sel := range []string{"h1", "h2"} {
		if !cssRule(css, sel, "overflow-wrap: anywhere") {
			t.Errorf("%s does not wrap anywhere", sel)
		}
	}
	if !cssRule(css, "tbody td.name", "white-space: normal", "overflow-wrap: anywhere") {
		t.Error("name cells do not wrap anywhere")
	}
	_, body, _ := g.do(c, "GET", "/console/customers", nil)
	if !strings.Contains(body, `<td class="name"><a href="/console/customers/`+cu.ID+`">`+name) {
		t.Errorf("the customers table's name cell is not a name cell:\n%s", body)
	}
	if status, body, _ := g.do(c, "GET", "/console/customers/"+cu.ID, nil); status != http.StatusOK || !strings.Contains(body, "<h1>Customer "+name+"</h1>") {
		t.Errorf("customer page = %d without its h1", status)
	}
}
