package ledger

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLiveOverridesRateAsAll: from the time the live overrides are taken
// on, they choose the override that all of them choose, for every model
// (usage.OverrideAt), so a gateway shows the costs it showed before they
// were left out of the customer's state.
func TestLiveOverridesRateAsAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := func(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }
	models := []string{"", "a", "b"}
	for round := range 2000 {
		var all []usage.Override
		for i := range rng.IntN(12) {
			o := usage.Override{ID: int64(i + 1), Model: models[rng.IntN(len(models))], DiscountBP: i, EffectiveFrom: hour(rng.IntN(20))}
			if rng.IntN(3) == 0 {
				end := o.EffectiveFrom.Add(time.Duration(1+rng.IntN(6)) * time.Hour)
				o.EffectiveTo = &end
			}
			all = append(all, o)
		}
		at := hour(rng.IntN(24)).Add(time.Duration(rng.IntN(3)) * 30 * time.Minute)
		live := liveOverrides(all, at)
		for step := range 30 {
			when := at.Add(time.Duration(step) * 30 * time.Minute)
			for _, m := range models[1:] {
				want, got := usage.OverrideAt(all, m, when), usage.OverrideAt(live, m, when)
				if (want == nil) != (got == nil) || (want != nil && want.ID != got.ID) {
					t.Fatalf("round %d: model %q at %s, live from %s: %+v; all of them choose %+v (all: %+v)", round, m, when, at, got, want, all)
				}
			}
		}
	}
}

// TestLivePricesRateAsAll: from the time the live price versions are
// taken on, they give the version that all of them give (usage.PriceAt).
func TestLivePricesRateAsAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := func(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }
	for round := range 2000 {
		var all []Price
		for i, start := range rng.Perm(20)[:rng.IntN(12)] {
			p := Price{ID: int64(i + 1), Model: "m", InputMicros: int64(i), EffectiveFrom: hour(start)}
			if rng.IntN(3) == 0 {
				end := p.EffectiveFrom.Add(time.Duration(1+rng.IntN(6)) * time.Hour)
				p.EffectiveTo = &end
			}
			all = append(all, p)
		}
		slices.SortFunc(all, func(a, b Price) int { return a.EffectiveFrom.Compare(b.EffectiveFrom) })
		at := hour(rng.IntN(24)).Add(time.Duration(rng.IntN(3)) * 30 * time.Minute)
		live := livePrices(all, at)
		for step := range 30 {
			when := at.Add(time.Duration(step) * 30 * time.Minute)
			want, wok := usage.PriceAt(all, when)
			got, gok := usage.PriceAt(live, when)
			if wok != gok || want.ID != got.ID {
				t.Fatalf("round %d: at %s, live from %s: %+v; all of them give %+v (all: %+v)", round, when, at, got, want, all)
			}
		}
	}
}
