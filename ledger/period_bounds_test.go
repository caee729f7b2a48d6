package ledger_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAPeriodsEndBelongsToTheNextPeriod: periods are half-open, [from,
// to): an event and an entry at exactly the first instant of February are
// February's, on its statement and in its export, and on January's in
// neither. Counted in both, finance would bill them twice.
func TestAPeriodsEndBelongsToTheNextPeriod(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "USD", "1", "0", "")
	mar := feb.AddDate(0, 1, 0)
	b.write(b.event("m", jan, usage.Tokens{PromptTokens: 1000}), b.event("m", feb, usage.Tokens{PromptTokens: 3000}))
	for _, in := range []ledger.EntryInput{{Amount: "1", EffectiveAt: jan}, {Amount: "2", EffectiveAt: feb}} {
		if _, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindAdjustment, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		period   string
		from, to time.Time
		total    string // usage 0.001 or 0.003, less the adjustment of 1 or 2
	}{
		{"2026-01", jan, feb, "-0.999"},
		{"2026-02", feb, mar, "-1.997"},
	} {
		st := b.statement(p.period)
		if len(st.Sections) != 1 || st.Sections[0].ExactTotal != p.total {
			t.Errorf("statement %s: %+v; want the exact total %s", p.period, st.Sections, p.total)
		}
		recs := b.export(p.from, p.to)
		var times []string
		for _, r := range recs[1:] {
			times = append(times, r[0]+" "+r[1])
		}
		slices.Sort(times)
		at := p.from.Format("2006-01-02T15:04:05.000000Z")
		if want := []string{"entry " + at, "event " + at}; !slices.Equal(times, want) {
			t.Errorf("export of %s: %v, want %v", p.period, times, want)
		}
	}
}
