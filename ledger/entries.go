package ledger

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
)

// Entry kinds.
const (
	KindCredit     = "credit"     // a credit grant or top-up: raises the balance
	KindAdjustment = "adjustment" // a correction, either way
	KindRefund     = "refund"     // reverses an earlier entry, or refunds an event's charge
	KindRerate     = "rerate"     // re-rating of one event under a corrected price book
)

// Entry is a ledger entry: an append-only movement of a customer's balance.
// Amount is a decimal string in Currency; positive raises the balance (in
// the customer's favour), negative lowers it.
type Entry struct {
	ID             int64     `json:"id"`
	CustomerID     string    `json:"customer_id"`
	Kind           string    `json:"kind"`
	Amount         string    `json:"amount"`
	Currency       string    `json:"currency"`
	EffectiveAt    time.Time `json:"effective_at"`
	EventID        string    `json:"event_id,omitempty"`
	Reverses       int64     `json:"reverses,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Memo           string    `json:"memo"`
	CreatedAt      time.Time `json:"created_at"`
}

// EntryInput is a credit or adjustment as an operator states it: Amount is
// a decimal string in the customer's currency with at most six decimal
// places (positive for a credit; either sign for an adjustment).
// EffectiveAt defaults to now. IdempotencyKey, when set, makes a retried
// request return the entry it created the first time.
type EntryInput struct {
	Amount         string    `json:"amount"`
	Memo           string    `json:"memo"`
	EffectiveAt    time.Time `json:"effective_at,omitzero"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
}

// AddEntry records a credit (kind KindCredit) or an adjustment
// (KindAdjustment) for a customer, in the customer's currency, and moves
// the balance in the same transaction. It returns ENotFound for an unknown
// customer, EInvalid for a bad amount (a credit must be positive, an
// adjustment non-zero), and, for a reused idempotency key, the entry first
// made with it (EConflict if that entry differs).
func (s *Store) AddEntry(ctx context.Context, customerID, kind string, in EntryInput) (Entry, error) {
	micros, err := parseSignedMicros("amount", in.Amount)
	switch {
	case err != nil:
		return Entry{}, err
	case kind != KindCredit && kind != KindAdjustment:
		return Entry{}, errorf(EInvalid, "kind %q is not credit or adjustment", kind)
	case kind == KindCredit && micros <= 0:
		return Entry{}, errorf(EInvalid, "amount: a credit must be positive, got %q", in.Amount)
	case micros == 0:
		return Entry{}, errorf(EInvalid, "amount: an adjustment must not be zero")
	}
	if in.EffectiveAt.IsZero() {
		in.EffectiveAt = s.now()
	}
	amount := decimal.New(micros, 6) // e12 units
	return s.insertEntry(ctx, customerID, kind, amount, in, "", 0)
}

// insertEntry writes one entry and moves the balance, idempotently on
// in.IdempotencyKey.
func (s *Store) insertEntry(ctx context.Context, customerID, kind string, amountE12 decimal.Decimal, in EntryInput, eventID string, reverses int64) (Entry, error) {
	if in.IdempotencyKey != "" {
		if e, err := s.entryByKey(ctx, in.IdempotencyKey); err == nil {
			amount, _ := decimal.NewFromString(e.Amount)
			if e.CustomerID != customerID || e.Kind != kind || !amount.Shift(12).Equal(amountE12) {
				return Entry{}, errorf(EConflict, "idempotency_key %q was used for a different entry (%d: %s %s %s)",
					in.IdempotencyKey, e.ID, e.Kind, e.Amount, e.Currency)
			}
			return e, nil
		}
	}
	var e Entry
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row := tx.QueryRow(ctx, `
			INSERT INTO ledger_entries (customer_id, kind, amount_e12, currency, effective_at, event_id,
			  reverses, idempotency_key, memo)
			SELECT id, $2, $3, currency, $4, NULLIF($5, '')::uuid, NULLIF($6, 0), NULLIF($7, ''), $8
			FROM customers WHERE id = $1
			RETURNING `+entryColumns, customerID, kind, amountE12.String(), in.EffectiveAt, eventID,
			reverses, in.IdempotencyKey, strings.TrimSpace(in.Memo))
		var err error
		if e, err = scanEntry(row); err != nil {
			return err
		}
		field := "credits_e12"
		if amountE12.IsNegative() {
			field, amountE12 = "charges_e12", amountE12.Neg()
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO customer_balances (customer_id, currency, `+field+`) VALUES ($1, $2, $3)
			ON CONFLICT (customer_id, currency) DO UPDATE SET `+field+` = customer_balances.`+field+` + EXCLUDED.`+field,
			customerID, e.Currency, amountE12.String())
		return err
	})
	if isCode(err, "23505") && in.IdempotencyKey != "" { // a concurrent retry won the race
		return s.entryByKey(ctx, in.IdempotencyKey)
	}
	return e, dbError(err, "customer "+customerID)
}

const entryColumns = `id, customer_id, kind, amount_e12::text, currency, effective_at,
  coalesce(event_id::text, ''), coalesce(reverses, 0), coalesce(idempotency_key, ''), memo, created_at`

func scanEntry(row pgx.Row) (Entry, error) {
	var e Entry
	var amount string
	if err := row.Scan(&e.ID, &e.CustomerID, &e.Kind, &amount, &e.Currency, &e.EffectiveAt, &e.EventID,
		&e.Reverses, &e.IdempotencyKey, &e.Memo, &e.CreatedAt); err != nil {
		return Entry{}, err
	}
	var err error
	e.Amount, err = FormatE12(amount)
	return e, err
}

func (s *Store) entryByKey(ctx context.Context, key string) (Entry, error) {
	e, err := scanEntry(s.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM ledger_entries WHERE idempotency_key = $1`, key))
	return e, dbError(err, "entry with idempotency_key "+key)
}

// Reverse records a refund entry that reverses entry id (a credit granted
// by mistake, say): the same amount, negated, once. It returns ENotFound
// for an unknown entry and EConflict for one already reversed or that is
// itself a reversal.
func (s *Store) Reverse(ctx context.Context, id int64, memo string) (Entry, error) {
	orig, err := scanEntry(s.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM ledger_entries WHERE id = $1`, id))
	if err != nil {
		return Entry{}, dbError(err, "entry")
	}
	if orig.Reverses != 0 {
		return Entry{}, errorf(EConflict, "entry %d is itself a reversal", id)
	}
	amount, _ := decimal.NewFromString(orig.Amount)
	return s.insertEntry(ctx, orig.CustomerID, KindRefund, amount.Shift(12).Neg(),
		EntryInput{Memo: memo, EffectiveAt: s.now(), IdempotencyKey: "reverse:" + strconv.FormatInt(id, 10)}, "", id)
}

// RefundEvent records a refund entry giving back what an event was charged
// (after discounts and any re-rating), once per event. It returns ENotFound
// for an unknown event and EConflict for one refunded already or charged
// nothing.
func (s *Store) RefundEvent(ctx context.Context, eventID, memo string) (Entry, error) {
	var customer, charge string
	err := s.pool.QueryRow(ctx, `
		SELECT e.customer_id::text, (e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001
		  - coalesce((SELECT sum(amount_e12) FROM ledger_entries r WHERE r.event_id = e.id AND r.kind = 'rerate'), 0))::text
		FROM usage_events e WHERE e.id = $1`, eventID).Scan(&customer, &charge)
	if err != nil {
		return Entry{}, dbError(err, "event "+eventID)
	}
	amount, _ := decimal.NewFromString(charge)
	if !amount.IsPositive() {
		return Entry{}, errorf(EConflict, "event %s was charged nothing", eventID)
	}
	e, err := s.insertEntry(ctx, customer, KindRefund, amount,
		EntryInput{Memo: memo, EffectiveAt: s.now(), IdempotencyKey: "refund:" + eventID}, eventID, 0)
	if err == nil && e.Kind != KindRefund {
		return Entry{}, errorf(EConflict, "event %s: idempotency clash", eventID)
	}
	return e, err
}

// Entries lists a customer's entries effective in [from, to), oldest first.
func (s *Store) Entries(ctx context.Context, customerID string, from, to time.Time) ([]Entry, error) {
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM ledger_entries
		WHERE customer_id = $1 AND effective_at >= $2 AND effective_at < $3 AND kind <> 'rerate'
		ORDER BY effective_at, id`, customerID, from, to)
	if err != nil {
		return nil, dbError(err, "entries")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) { return scanEntry(r) })
	if out == nil {
		out = []Entry{}
	}
	return out, dbError(err, "entries")
}
