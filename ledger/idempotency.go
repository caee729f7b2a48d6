package ledger

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
)

// Idempotency key prefixes the ledger keeps for the entries it keys
// itself: a refund of an event, and the reversal of an entry.
const (
	refundKeyPrefix  = "refund:"
	reverseKeyPrefix = "reverse:"
)

// newEntry is a ledger entry to write, as asked for.
type newEntry struct {
	customerID, kind string
	amountE12        decimal.Decimal
	// currency is the entry's currency; "" is the customer's.
	currency    string
	effectiveAt time.Time
	// explicitAt is true when the caller chose effectiveAt (not "now").
	explicitAt bool
	eventID    string
	reverses   int64
	key, memo  string
	// strict is true when the caller chose the idempotency key: a reuse
	// must then repeat the memo and any effective_at too. The ledger's own
	// keys (a refund, a reversal) identify the entry by themselves.
	strict bool
	// before, when set, runs first in the entry's transaction and may
	// refuse the entry or set its amount and currency there (RefundEvent
	// reads the event's charge under the rerate lock).
	before func(ctx context.Context, tx pgx.Tx, n *newEntry) error
}

// replay answers n with e, the entry first made with n's idempotency key,
// when it is the entry n asks for, and otherwise with EConflict naming
// what differs.
func (n newEntry) replay(e Entry) (Entry, error) {
	if err := n.sameAs(e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// sameAs returns nil when e is the entry n asks for, and otherwise
// EConflict naming what differs.
func (n newEntry) sameAs(e Entry) error {
	amount, err := decimal.NewFromString(e.Amount)
	if err != nil {
		return err
	}
	var differs string
	switch {
	case !strings.EqualFold(e.CustomerID, n.customerID): // UUIDs, however spelled
		differs = "customer"
	case e.Kind != n.kind:
		differs = "kind"
	case !amount.Shift(12).Equal(n.amountE12):
		differs = "amount"
	case n.currency != "" && e.Currency != n.currency:
		differs = "currency"
	case !strings.EqualFold(e.EventID, n.eventID):
		differs = "event_id"
	case e.Reverses != n.reverses:
		differs = "reverses"
	case n.strict && e.Memo != n.memo:
		differs = "memo"
	case n.strict && n.explicitAt && e.EffectiveAt.Sub(n.effectiveAt).Abs() >= time.Microsecond: // stored to the µs
		differs = "effective_at"
	default:
		return nil
	}
	return errorf(EConflict, "idempotency_key %q was used for a different entry (%d: %s %s %s; the %s differs)",
		n.key, e.ID, e.Kind, e.Amount, e.Currency, strings.ReplaceAll(differs, "_", " "))
}
