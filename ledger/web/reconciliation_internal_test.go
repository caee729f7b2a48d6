package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestUnpricedShownCountsEveryModel: the reconciliation page says how
// many unpriced models the reconciliation counted, not how many the API
// listed (at most ledger.MaxListed).
func TestUnpricedShownCountsEveryModel(t *testing.T) {
	rec := ledger.Reconciliation{UnpricedModels: ledger.MaxListed + 500}
	for i := range ledger.MaxListed {
		rec.Unpriced = append(rec.Unpriced, ledger.UnpricedModel{Model: fmt.Sprintf("m%d", i), Events: int64(ledger.MaxListed - i)})
	}
	l := reconciliationData{Result: &rec}.UnpricedShown()
	if len(l.Rows) != modelsShown || l.Of != ledger.MaxListed+500 || l.Rows[0].Model != "m0" {
		t.Errorf("UnpricedShown = %d rows of %d, first %+v; want %d of %d, m0 first", len(l.Rows), l.Of, l.Rows[0], modelsShown, ledger.MaxListed+500)
	}
	rec = ledger.Reconciliation{UnpricedModels: 1, Unpriced: []ledger.UnpricedModel{{Model: "m", Events: 2}}}
	if l := (reconciliationData{Result: &rec}).UnpricedShown(); len(l.Rows) != 1 || l.Of != 0 {
		t.Errorf("UnpricedShown of one model = %d rows of %d, want 1, all of them (Of 0)", len(l.Rows), l.Of)
	}
}

// TestUnpricedNoteSaysWhatTheAPIListsOfFewModels: with more unpriced
// models than the page shows but no more than the admin API lists, the
// page said the API "lists the 1,000 of the most events", when it lists
// every one of them (150, say).
func TestUnpricedNoteSaysWhatTheAPIListsOfFewModels(t *testing.T) {
	for _, c := range []struct {
		models int
		want   string
	}{
		{modelsShown + 50, "lists every one"},
		{ledger.MaxListed + 500, "lists the 1,000 of the most events"},
	} {
		rec := ledger.Reconciliation{UnpricedModels: int64(c.models)}
		for i := range min(c.models, ledger.MaxListed) {
			rec.Unpriced = append(rec.Unpriced, ledger.UnpricedModel{Model: fmt.Sprintf("m%d", i), Events: int64(c.models - i)})
		}
		var b strings.Builder
		v := view{App: "console", Title: "Reconciliation", Data: reconciliationData{Result: &rec}}
		if err := parseTemplates("reconciliation")["reconciliation"].Execute(&b, v); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if i := strings.Index(page, "<code>GET /admin/v1/reconciliation</code>"); i < 0 || !strings.Contains(page[i:], c.want) {
			t.Errorf("%d unpriced models: the page's note %q; want it to say the API %s", c.models, page[max(i, 0):min(len(page), max(i, 0)+200)], c.want)
		}
	}
}
