package ledger_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A re-rating is a rating: its entry must say on what terms it rated the
// event, as the event says how it was first rated (DESIGN invariant 4:
// every event records the price version it was rated with). A customer
// given a custom price (or a discount) after the fact and re-rated gets a
// rerate entry that names only the price book's version, which did not
// rate it, and no override: the export's override_id and discount_bp are
// empty on the entry row, so finance cannot trace the new charge to the
// terms that made it.
func TestRerateEntryRecordsTheOverrideItAppliedInTheExport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		override ledger.OverrideInput
		bp       string
	}{
		{"custom price", ledger.OverrideInput{Model: "m", Price: &ledger.PriceInput{Currency: "USD", Input: "0.5", Output: "0.5"}, EffectiveFrom: jan}, "0"},
		{"discount", ledger.OverrideInput{Model: "m", DiscountPercent: "25", EffectiveFrom: jan}, "2500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBilling(t, nil)
			b.price("m", "USD", "1", "1", "")
			at := jan.Add(10 * 24 * time.Hour)
			b.write(b.event("m", at, usage.Tokens{PromptTokens: 1_000_000}))
			o, err := b.s.CreateOverride(b.ctx, b.c.ID, tc.override)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := b.s.Rerate(b.ctx, jan, feb, nil); err != nil || res.Adjusted != 1 {
				t.Fatalf("rerate: %+v %v", res, err)
			}
			recs := b.export(jan, feb)
			col := func(name string) int { return slices.Index(ledger.ExportColumns, name) }
			var found bool
			for _, r := range recs[1:] {
				if r[col("record")] != "entry" || r[col("kind")] != ledger.KindRerate {
					continue
				}
				found = true
				if got, want := r[col("override_id")], strconv.FormatInt(o.ID, 10); got != want {
					t.Errorf("rerate entry's override_id = %q, want %q (the %s that re-rated it); row %q", got, want, tc.name, r)
				}
				if got := r[col("discount_bp")]; got != tc.bp {
					t.Errorf("rerate entry's discount_bp = %q, want %q; row %q", got, tc.bp, r)
				}
			}
			if !found {
				t.Fatalf("no rerate entry in the export:\n%q", recs)
			}
		})
	}
}
