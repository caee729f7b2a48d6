package ledger_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAPeriodOpensWhereTheLastClosed: a statement's opening balance is
// the previous period's closing one, with the usage and the entries at
// exactly the period's first instant in the period, not also in its
// opening (nor in the previous period's entry list). Both ways of reading
// the opening are pinned: from the start of the customer's history (a
// period nearer its start) and back from the balance the ledger keeps (a
// period nearer its end).
func TestAPeriodOpensWhereTheLastClosed(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "USD", "1", "0", "")
	b.write(b.event("m", jan, usage.Tokens{PromptTokens: 1000}), b.event("m", feb, usage.Tokens{PromptTokens: 3000}))
	for _, in := range []ledger.EntryInput{{Amount: "10", EffectiveAt: jan}, {Amount: "20", EffectiveAt: feb}} {
		if _, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, in); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		janSt, febSt := b.statement("2026-01"), b.statement("2026-02")
		if len(janSt.Sections) != 1 || len(febSt.Sections) != 1 {
			t.Fatalf("%s: sections %+v and %+v, want one each", when, janSt.Sections, febSt.Sections)
		}
		j, f := janSt.Sections[0], febSt.Sections[0]
		// January: 10 credited, 0.001 charged; February: 20 and 0.003.
		if j.OpeningBalance != "0" || j.ClosingBalance != "9.999" || f.OpeningBalance != "9.999" || f.ClosingBalance != "29.996" {
			t.Errorf("%s: January %s to %s, February %s to %s; want 0 to 9.999, 9.999 to 29.996", when,
				j.OpeningBalance, j.ClosingBalance, f.OpeningBalance, f.ClosingBalance)
		}
	}
	// The entry at exactly February's first instant is February's in the
	// entry lists too.
	es, err := b.s.Entries(b.ctx, b.c.ID, jan, feb)
	page, perr := b.s.EntriesPage(b.ctx, b.c.ID, jan, feb, 0, "")
	if err != nil || perr != nil || len(es) != 1 || len(page.Data) != 1 || es[0].Amount != "10" || page.Data[0].Amount != "10" {
		t.Errorf("January's entries = %+v, %v; page %+v, %v; want the credit of 10 alone", es, err, page.Data, perr)
	}
	check("February the customer's last month") // February's opening read back from the balance
	b.write(b.event("m", feb.AddDate(0, 6, 0), usage.Tokens{PromptTokens: 1}))
	check("February early in the customer's history") // read forward from the start
}
