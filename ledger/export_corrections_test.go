package ledger_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The export is finance's copy of every ledger line. An event whose
// figures the gateway or the meter changed before storing them (counts
// clamped, cache reads lowered to the prompt, a time moved to when it was
// received, and so into another month) is billed on the changed figures,
// and its corrections say so (docs/billing.md, "Corrections"). The export
// left them out: an auditor holding it could not tell a provider's bill
// from one the ledger altered, nor why an event sits in a month its
// gateway did not date it in. Its event rows carry them now.
func TestExportShowsAnEventsCorrections(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "USD", "1", "1", "")
	e := b.event("m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 10, CachedTokens: 10, CompletionTokens: 5})
	e.Corrections = usage.CorrectionCacheOverPrompt + "," + usage.CorrectionTimeAhead
	plain := b.event("m", jan.Add(2*time.Hour), usage.Tokens{PromptTokens: 10, CompletionTokens: 5})
	b.write(e, plain)
	recs := b.export(jan, feb)
	col := slices.Index(ledger.ExportColumns, "corrections")
	if col < 0 {
		t.Fatalf("the export has no corrections column: %v", ledger.ExportColumns)
	}
	if last := ledger.ExportColumns[len(ledger.ExportColumns)-1]; last != "recorded_at" {
		t.Errorf("the export's last column is %q, want recorded_at (docs/billing.md: every row ends with it)", last)
	}
	got := map[string]string{}
	for _, r := range recs[1:] {
		got[r[slices.Index(ledger.ExportColumns, "event_id")]] = r[col]
	}
	if got[e.ID] != e.Corrections || got[plain.ID] != "" {
		t.Errorf("corrections exported %q and %q, want %q and \"\"", got[e.ID], got[plain.ID], e.Corrections)
	}
}
