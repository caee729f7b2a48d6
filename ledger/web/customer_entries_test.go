package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCustomerPageShowsTheLatestEntries: the customer page listed every
// entry of three months: after a re-rate (an entry per event) one had
// 17,584 rows, 2 MB. It lists the latest 50, newest first, and says where
// the older ones are.
func TestCustomerPageShowsTheLatestEntries(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("busy", "none", 0)
	var ids []int64
	for i := range 53 {
		e, err := g.api.AddEntry(ctx, cu.ID, ledger.KindCredit, ledger.EntryInput{Amount: "1", Memo: "n" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/customers/"+cu.ID, nil)
	table := body[strings.Index(body, `<table id="entries">`):]
	table = table[:strings.Index(table, "</table>")]
	if n := strings.Count(table, "<tr><td>"); n != 50 {
		t.Errorf("the entries table has %d rows, want the latest 50", n)
	}
	row := func(id int64) string { return "<tr><td>" + strconv.FormatInt(id, 10) + "</td>" }
	if first := strings.Index(table, "<tr><td>"); first < 0 || !strings.HasPrefix(table[first:], row(ids[52])) {
		t.Errorf("the first row is not the newest entry, %d", ids[52])
	}
	if !strings.Contains(table, row(ids[3])) || strings.Contains(table, row(ids[2])) {
		t.Errorf("the table does not end at the 50th newest entry, %d", ids[3])
	}
	for _, want := range []string{"The latest 50 entries since", "Older ones are not shown", "tollgate credits list --customer " + cu.ID} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// A customer with no more entries than are shown (50, exactly: a
	// mutation audit, > for >=, showed 49 and a word of more) has them
	// all, and no word of more.
	few, _, _ := g.customer("quiet", "none", 0)
	for range 50 {
		if _, err := g.api.AddEntry(ctx, few.ID, ledger.KindCredit, ledger.EntryInput{Amount: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	status, body, _ := g.do(c, "GET", "/console/customers/"+few.ID, nil)
	if status != http.StatusOK || !strings.Contains(body, "Every entry since") || strings.Contains(body, "Older ones") ||
		strings.Count(body, "<tr><td>") < 50 {
		t.Errorf("customer with 50 entries = %d, want every entry and no word of more", status)
	}
}
