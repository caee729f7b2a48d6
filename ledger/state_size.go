package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// MaxLiveTermsBytes bounds, as JSON, the terms that can still apply that
// one state carries to the gateways: a customer's overrides
// (liveOverrides), a model's price versions (livePrices). A state is one
// NATS message (NATS' default max_payload is 1 MiB), and overrides and
// prices are append-only, so a state past it could never be published
// again: the key syncer retried it forever, holding back every key
// change after it.
const MaxLiveTermsBytes = 256 * 1024

// liveOverrides returns those of os that can apply at at or later, the
// ones a gateway needs to rate requests from at on (usage.OverrideAt):
// not a bounded one whose window has ended, nor an open-ended one that a
// later open-ended one of the same model (or of all models), started by
// at, has replaced for good. os keeps its order.
func liveOverrides(os []usage.Override, at time.Time) []usage.Override {
	// current is, per model, the open-ended override in force at at.
	current := map[string]*usage.Override{}
	for i := range os {
		o := &os[i]
		if o.EffectiveTo != nil || o.EffectiveFrom.After(at) {
			continue
		}
		if c := current[o.Model]; c == nil || laterOverride(o, c) {
			current[o.Model] = o
		}
	}
	var out []usage.Override
	for i := range os {
		o := &os[i]
		if o.EffectiveTo != nil && !at.Before(*o.EffectiveTo) {
			continue // ended
		}
		if c := current[o.Model]; o.EffectiveTo == nil && c != nil && laterOverride(c, o) {
			continue // replaced
		}
		out = append(out, *o)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// laterOverride reports whether a takes over from b, as usage.OverrideAt
// orders two that qualify alike: the later started, then the later made.
func laterOverride(a, b *usage.Override) bool {
	return cmp.Or(a.EffectiveFrom.Compare(b.EffectiveFrom), cmp.Compare(a.ID, b.ID)) > 0
}

// checkOverrideState refuses (EInvalid) override o, just written in tx,
// when it is one that can still apply and makes the customer's overrides
// that can more than MaxLiveTermsBytes as JSON, and more of them than
// without it: an override that can no longer apply (one for re-rating the
// past) is always taken, and so is one that replaces another (a way out
// for a customer already past the bound).
func checkOverrideState(ctx context.Context, tx pgx.Tx, o Override) error {
	all, err := queryOverrides(ctx, tx, `WHERE customer_id = $1`, o.CustomerID)
	if err != nil {
		return err
	}
	var with, without []usage.Override
	for _, a := range all {
		with = append(with, a.terms())
		if a.ID != o.ID {
			without = append(without, a.terms())
		}
	}
	now := time.Now()
	after, err := termsGrow(liveOverrides(with, now), liveOverrides(without, now), func(l usage.Override) bool { return l.ID == o.ID })
	if err != nil || after == 0 {
		return err
	}
	return errorf(EInvalid, "the overrides of customer %s in force or to come would be %d bytes as JSON, more than %d "+
		"(they go to every gateway in one message; < > and & count six bytes): fewer of them, or an all-models discount, can say it",
		o.CustomerID, after, MaxLiveTermsBytes)
}

// termsGrow returns the size as JSON of with, the live terms with a new
// one, when the new one is among them (isNew), they are more than
// MaxLiveTermsBytes, and they are more terms than without, the live terms
// before it (the new one replaces none); 0 when the new terms are to be
// taken.
func termsGrow[T any](with, without []T, isNew func(T) bool) (int, error) {
	if len(with) <= len(without) || !slices.ContainsFunc(with, isNew) {
		return 0, nil
	}
	b, err := json.Marshal(with)
	if err != nil || len(b) <= MaxLiveTermsBytes {
		return 0, err
	}
	return len(b), nil
}

// livePrices returns those of ps (one model's, sorted by EffectiveFrom)
// that can apply at at or later (usage.PriceAt): not a bounded version
// whose window has ended, nor an open-ended one that a later open-ended
// one, started by at, has replaced for good. ps keeps its order.
func livePrices(ps []Price, at time.Time) []Price {
	current := -1 // the open-ended version in force at at
	for i, p := range ps {
		if p.EffectiveFrom.After(at) {
			break
		}
		if p.EffectiveTo == nil {
			current = i
		}
	}
	out := []Price{}
	for i, p := range ps {
		if (p.EffectiveTo != nil && !at.Before(*p.EffectiveTo)) || (p.EffectiveTo == nil && i < current) {
			continue // ended, or replaced
		}
		out = append(out, p)
	}
	return out
}

// checkPriceState refuses (EInvalid) price version p, just written in tx,
// as checkOverrideState refuses an override: when it can still apply and
// makes its model's versions that can more than MaxLiveTermsBytes as
// JSON, and more of them than without it (versions are never removed).
func checkPriceState(ctx context.Context, tx pgx.Tx, p Price) error {
	all, err := queryPrices(ctx, tx, `WHERE model = $1`, p.Model)
	if err != nil {
		return err
	}
	without := slices.DeleteFunc(slices.Clone(all), func(a Price) bool { return a.ID == p.ID })
	now := time.Now()
	after, err := termsGrow(livePrices(all, now), livePrices(without, now), func(l Price) bool { return l.ID == p.ID })
	if err != nil || after == 0 {
		return err
	}
	return errorf(EInvalid, "the price versions of %q in force or to come would be %d bytes as JSON, more than %d "+
		"(they go to every gateway in one message; < > and & count six bytes)", p.Model, after, MaxLiveTermsBytes)
}
