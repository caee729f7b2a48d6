package ledger_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestExportAddsUpToTheStatement pins the export's figures as
// ExportColumns documents them: each event row carries its token classes
// (cache reads, cache writes and reasoning apart), each rerate entry row
// names its event, and a period's charges (the events' charges less the
// rerate entries' amounts) and list cost (the events' and the rerate
// entries' list_cost) are exactly what the period was billed, re-rating
// and discount included, as its statement says, whose usage line counts
// the same tokens by class.
func TestExportAddsUpToTheStatement(t *testing.T) {
	b := newBilling(t, nil)
	price := func(input string, from int) {
		t.Helper()
		if _, err := b.s.CreatePrice(b.ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: input, CachedInput: "0.5",
			CacheWrite: "3", Output: "2", Reasoning: "4", EffectiveFrom: jan.AddDate(0, 0, from)}); err != nil {
			t.Fatal(err)
		}
	}
	price("1", 0)
	if _, err := b.s.CreateOverride(b.ctx, b.c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: jan.AddDate(0, 0, 5)}); err != nil {
		t.Fatal(err)
	}
	u := usage.Tokens{PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 200, ReasoningTokens: 50}
	e1, e2 := b.event("m", jan.AddDate(0, 0, 2), u), b.event("m", jan.AddDate(0, 0, 6), u)
	b.write(e1, e2)
	// At 1: 600 + 300×0.5 + 100×3 + 150×2 + 50×4 = 1550 µ; the version from
	// the 1st at 2, added late, re-rates both to 2150 µ (e2 10% off).
	price("2", 1)
	if res, err := b.s.Rerate(b.ctx, jan, feb, nil); err != nil || res.Adjusted != 2 {
		t.Fatalf("Rerate = %+v, %v", res, err)
	}
	recs := b.export(jan, feb)
	col := func(r []string, name string) string { return r[slices.Index(ledger.ExportColumns, name)] }
	charges, list := decimal.Zero, decimal.Zero
	reratedEvents := map[string]bool{}
	for _, r := range recs[1:] {
		list = list.Add(dec(t, col(r, "list_cost")))
		switch col(r, "record") {
		case "event":
			charges = charges.Add(dec(t, col(r, "charge")))
			for name, want := range map[string]int64{"prompt_tokens": 1000, "cached_tokens": 300, "cache_write_tokens": 100,
				"completion_tokens": 200, "reasoning_tokens": 50} {
				if got := col(r, name); got != strconv.FormatInt(want, 10) {
					t.Errorf("event row's %s = %s, want %d; row %q", name, got, want, r)
				}
			}
		case "entry":
			charges = charges.Sub(dec(t, col(r, "amount")))
			reratedEvents[col(r, "event_id")] = col(r, "kind") == ledger.KindRerate
		}
	}
	if !reratedEvents[e1.ID] || !reratedEvents[e2.ID] || len(reratedEvents) != 2 {
		t.Errorf("rerate entries name events %v, want %s and %s", reratedEvents, e1.ID, e2.ID)
	}
	// 2150 + 2150 × 0.9 = 4085 µ charged; 4300 µ list cost.
	st := b.statement("2026-01")
	if len(st.Sections) != 1 || !charges.Equal(dec(t, st.Sections[0].ExactTotal)) || charges.String() != "0.004085" || list.String() != "0.0043" {
		t.Errorf("export: charges %s, list cost %s; statement %+v; want 0.004085 and 0.0043", charges, list, st.Sections)
	}
	// The statement's usage line counts the same tokens by class.
	want := ledger.LineUsage{Requests: 2, PromptTokens: 2000, CachedTokens: 600, CacheWriteTokens: 200, CompletionTokens: 400, ReasoningTokens: 100}
	if len(st.Sections) != 1 || st.Sections[0].Lines[0].Usage == nil || *st.Sections[0].Lines[0].Usage != want {
		t.Errorf("statement lines %+v, want a usage line of %+v", st.Sections, want)
	}
}
