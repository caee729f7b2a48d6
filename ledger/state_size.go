package ledger

import (
	"cmp"
	"context"
	"encoding/json"
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
// when it is one that can still apply and the customer's overrides that
// can are then more than MaxLiveTermsBytes as JSON. An override that
// can no longer apply (one for re-rating the past) is always taken.
func checkOverrideState(ctx context.Context, tx pgx.Tx, o Override) error {
	all, err := queryOverrides(ctx, tx, `WHERE customer_id = $1`, o.CustomerID)
	if err != nil {
		return err
	}
	terms := make([]usage.Override, len(all))
	for i, a := range all {
		terms[i] = a.terms()
	}
	live := liveOverrides(terms, time.Now())
	isLive := false
	for _, l := range live {
		isLive = isLive || l.ID == o.ID
	}
	if !isLive {
		return nil
	}
	b, err := json.Marshal(live)
	if err != nil || len(b) <= MaxLiveTermsBytes {
		return err
	}
	return errorf(EInvalid, "the overrides of customer %s in force or to come would be %d bytes as JSON, more than %d "+
		"(they go to every gateway in one message; < > and & count six bytes): fewer of them, or an all-models discount, can say it",
		o.CustomerID, len(b), MaxLiveTermsBytes)
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
// when it can still apply and its model's versions that can are then more
// than MaxLiveTermsBytes as JSON: they go to the gateways in one
// message, and versions are never removed. A version that can no longer
// apply (one for re-rating the past) is always taken.
func checkPriceState(ctx context.Context, tx pgx.Tx, p Price) error {
	all, err := queryPrices(ctx, tx, `WHERE model = $1`, p.Model)
	if err != nil {
		return err
	}
	live := livePrices(all, time.Now())
	isLive := false
	for _, l := range live {
		isLive = isLive || l.ID == p.ID
	}
	if !isLive {
		return nil
	}
	b, err := json.Marshal(live)
	if err != nil || len(b) <= MaxLiveTermsBytes {
		return err
	}
	return errorf(EInvalid, "the price versions of %q in force or to come would be %d bytes as JSON, more than %d "+
		"(they go to every gateway in one message; < > and & count six bytes)", p.Model, len(b), MaxLiveTermsBytes)
}
