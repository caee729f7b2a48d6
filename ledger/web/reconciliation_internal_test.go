package web

import (
	"fmt"
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
