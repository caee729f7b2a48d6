package ledger_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestARerateShowsOnceOnTheStatement: a re-rating moves its period's
// usage line (through the rollups); its rerate entry is not listed again
// as an adjustment, which would bill the correction twice. After an event
// first unpriced is priced by re-rating, the statement charges it once and
// lists no unpriced usage, and the next period opens at the balance.
func TestARerateShowsOnceOnTheStatement(t *testing.T) {
	b := newBilling(t, nil)
	// An event of 2025 (unpriced, charging nothing) puts January nearer the
	// end of the customer's history than its start.
	b.write(b.event("old", jan.AddDate(0, -7, 0), usage.Tokens{PromptTokens: 1}),
		b.event("m", jan.AddDate(0, 0, 9), usage.Tokens{PromptTokens: 2000, CompletionTokens: 500}))
	b.price("m", "USD", "3", "15", "")
	if res, err := b.s.Rerate(b.ctx, jan, feb, nil); err != nil || res.Priced != 1 {
		t.Fatalf("Rerate = %+v, %v", res, err)
	}
	st := b.statement("2026-01")
	// 2000 × 3 + 500 × 15 = 13500 µ.
	if len(st.Sections) != 1 || st.Sections[0].ExactTotal != "0.0135" || st.Sections[0].OpeningBalance != "0" || len(st.Unpriced) != 0 {
		t.Fatalf("statement after re-rating: %+v, unpriced %+v; want 0.0135 charged once", st.Sections, st.Unpriced)
	}
	for _, l := range st.Sections[0].Lines {
		if l.Kind != ledger.KindUsage && l.Kind != ledger.KindRounding {
			t.Errorf("statement line %+v: a rerate entry listed beside the usage it moved", l)
		}
	}
	// February's opening read back from the balance, then (with a later
	// month in the customer's history) forward from its start.
	for _, later := range []bool{false, true} {
		if later {
			b.write(b.event("m", feb.AddDate(2, 0, 0), usage.Tokens{PromptTokens: 1}))
		}
		if next := b.statement("2026-02"); len(next.Sections) != 1 || next.Sections[0].OpeningBalance != "-0.0135" {
			t.Errorf("February opens at %+v, want -0.0135", next.Sections)
		}
	}
}
