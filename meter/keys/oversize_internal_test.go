package keys

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestOverridesAtRateAsAll: the overrides a customer's state is trimmed to
// when too big (overridesAt) choose, at the time of the trim, the
// override that all of them choose for every model (usage.OverrideAt).
func TestOverridesAtRateAsAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
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
		now := overridesAt(all, at)
		for _, m := range append(models[1:], "c") {
			want, got := usage.OverrideAt(all, m, at), usage.OverrideAt(now, m, at)
			if (want == nil) != (got == nil) || (want != nil && want.ID != got.ID) {
				t.Fatalf("round %d: model %q at %s: %+v; all of them choose %+v (all: %+v)", round, m, at, got, want, all)
			}
		}
	}
}

// TestPricesFromRateAsAll: from the time a model's prices are trimmed
// when too big (pricesFrom), they give the version that all of them give
// (usage.PriceAt).
func TestPricesFromRateAsAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := func(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }
	for round := range 2000 {
		var all []usage.Price
		for i, start := range rng.Perm(20)[:rng.IntN(12)] {
			p := usage.Price{ID: int64(i + 1), Model: "m", InputMicros: int64(i), EffectiveFrom: hour(start)}
			if rng.IntN(3) == 0 {
				end := p.EffectiveFrom.Add(time.Duration(1+rng.IntN(6)) * time.Hour)
				p.EffectiveTo = &end
			}
			all = append(all, p)
		}
		slices.SortFunc(all, func(a, b usage.Price) int { return a.EffectiveFrom.Compare(b.EffectiveFrom) })
		at := hour(rng.IntN(24)).Add(time.Duration(rng.IntN(3)) * 30 * time.Minute)
		live := pricesFrom(all, at)
		for step := range 30 {
			when := at.Add(time.Duration(step) * 30 * time.Minute)
			want, wok := usage.PriceAt(all, when)
			got, gok := usage.PriceAt(live, when)
			if wok != gok || want.ID != got.ID {
				t.Fatalf("round %d: at %s, trimmed at %s: %+v; all of them give %+v (all: %+v)", round, when, at, got, want, all)
			}
		}
	}
}

// TestATooBigKeyStaysRefusedPastItsReset: the state published in place of
// a key's too big for one message refuses the key with no end, even when
// the key was blocked by a spend limit until a reset: past the reset it
// would otherwise be served without its allowlist (fail open). (Mutant:
// smallerKey keeping BlockedUntil.)
func TestATooBigKeyStaysRefusedPastItsReset(t *testing.T) {
	reset := time.Now().Add(time.Hour)
	s := usage.KeyState{Blocked: "daily limit", BlockedUntil: &reset, AllowedModels: []string{"a"}}
	for _, sm := range smallerKey(s, 1<<20) {
		k := sm.state.(usage.KeyState)
		if k.BlockedAt(reset.Add(time.Minute)) == "" || len(k.AllowedModels) != 0 {
			t.Fatalf("published in its place: %+v; want it refused after the reset too", k)
		}
	}
}
