package keys

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A state is one NATS message, and one too big for it is refused at every
// try: put as it was, it held its batch of changes in the outbox for
// good, and every change after it (revocations included) away from the
// gateways. The ledger bounds what the API writes into a state, not what
// a database already holds (older data, or data written by SQL), so such
// a state is published smaller instead (Publisher.fit), in a way that is
// safe for the gateways: what they enforce is never loosened.

// tooBig reports whether err refuses a message as too big for good: the
// client's check against the server's max_payload (nats.ErrMaxPayload), or
// the stream's against its max_msg_size (a bucket's max value size).
func tooBig(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) ||
		(errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum)
}

// smaller is a state to publish in place of one too big, and what it does
// and the operator is to do, for the log.
type smaller struct {
	state any
	does  string
}

// smallerKey is what is published for key state s, size bytes as JSON,
// when too big: the key refused, saying why (its allowlist, limits or
// expiry cannot be enforced without them: fail closed).
func smallerKey(s usage.KeyState, size int) []smaller {
	s.AllowedModels, s.BlockedUntil = nil, nil
	s.Blocked = fmt.Sprintf("this API key's settings are too large to distribute to the gateways (%d bytes as JSON): "+
		"the operator must shrink them (its allowed_models)", size)
	return []smaller{{s, "the key is refused on every gateway (402) until the operator shrinks its allowed_models " +
		"(fewer names, or provider/* ones)"}}
}

// smallerCustomer is what is published, in turn, for customer state s
// when too big: with its overrides in force at t alone, then with none.
// Its budget fields (blocked, credit) are always kept; overrides only
// make a gateway's estimate of a cost, the ledger rates with them all.
func smallerCustomer(s usage.CustomerState, t time.Time) []smaller {
	fix := "the operator must reduce the customer's overrides in force or to come"
	var out []smaller
	if now := overridesAt(s.Overrides, t); len(now) < len(s.Overrides) {
		trimmed := s
		trimmed.Overrides = now
		out = append(out, smaller{trimmed, "published with only the overrides in force now: gateways estimate " +
			"its costs without those to come (the ledger rates them all); " + fix})
	}
	s.Overrides = nil
	return append(out, smaller{s, "published without its overrides: gateways estimate its costs at list prices " +
		"(the ledger rates them with its overrides); " + fix})
}

// smallerPrices is what is published, in turn, for a model's prices when
// too big: the versions that can still apply at t (in force, and to
// come), then none, withheld: gateways then cannot estimate the model's
// costs (Cache.Rate), rather than take it for unpriced.
func smallerPrices(s usage.ModelPrices, t time.Time, size int) []smaller {
	fix := "the operator must reduce its price versions in force or to come"
	var out []smaller
	if live := pricesFrom(s.Versions, t); len(live) < len(s.Versions) {
		trimmed := s
		trimmed.Versions = live
		out = append(out, smaller{trimmed, "published with only its versions in force or to come"})
	}
	s.Versions = nil
	s.Withheld = fmt.Sprintf("its price versions are too large to distribute to the gateways (%d bytes as JSON)", size)
	return append(out, smaller{s, "published without prices: gateways refuse it to keys with spend limits and to " +
		"prefix routes (503), and show no cost; " + fix})
}

// overridesAt returns those of os that usage.OverrideAt can pick at t:
// of the ones in force then, per model (and for all models) the latest
// bounded one and the latest open-ended one. os keeps its order.
func overridesAt(os []usage.Override, t time.Time) []usage.Override {
	type class struct {
		model string
		open  bool
	}
	best := map[class]int{}
	for i, o := range os {
		if o.EffectiveFrom.After(t) || (o.EffectiveTo != nil && !t.Before(*o.EffectiveTo)) {
			continue
		}
		k := class{o.Model, o.EffectiveTo == nil}
		if j, ok := best[k]; !ok || o.EffectiveFrom.After(os[j].EffectiveFrom) ||
			(o.EffectiveFrom.Equal(os[j].EffectiveFrom) && o.ID > os[j].ID) {
			best[k] = i
		}
	}
	var out []usage.Override
	for i, o := range os {
		if j, ok := best[class{o.Model, o.EffectiveTo == nil}]; ok && j == i {
			out = append(out, o)
		}
	}
	return out
}

// pricesFrom returns those of ps (one model's, sorted by EffectiveFrom)
// that usage.PriceAt can pick at t or later: not a bounded version whose
// window has ended, nor an open-ended one that a later open-ended one,
// started by t, has replaced. ps keeps its order.
func pricesFrom(ps []usage.Price, t time.Time) []usage.Price {
	current := -1
	for i, p := range ps {
		if p.EffectiveFrom.After(t) {
			break
		}
		if p.EffectiveTo == nil {
			current = i
		}
	}
	var out []usage.Price
	for i, p := range ps {
		if (p.EffectiveTo != nil && !t.Before(*p.EffectiveTo)) || (p.EffectiveTo == nil && i < current) {
			continue
		}
		out = append(out, p)
	}
	return out
}
