package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
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

// MaxIdempotencyKeyLen is the longest idempotency key of a credit or an
// adjustment, in bytes: keys are unique through a btree index, whose rows
// Postgres limits to about 2.7 kB, so a longer key would be refused there.
const MaxIdempotencyKeyLen = 255

// EntryInput is a credit or adjustment as an operator states it: Amount is
// a decimal string in the customer's currency with at most six decimal
// places (positive for a credit; either sign for an adjustment), and no
// more than the currency's minor unit has (MinorUnit: 2 for USD, 0 for
// JPY) unless AllowSubMinor says the finer amount is meant.
// EffectiveAt defaults to now. IdempotencyKey, when set, makes a retried
// request return the entry it created the first time.
type EntryInput struct {
	Amount         string    `json:"amount"`
	Memo           string    `json:"memo"`
	EffectiveAt    time.Time `json:"effective_at,omitzero"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	AllowSubMinor  bool      `json:"allow_sub_minor,omitempty"`
}

// maxEntryAhead is how far past the ledger's clock an entry's effective_at
// may be (for the clocks of the operator's tools that run a little ahead).
const maxEntryAhead = 5 * time.Minute

// AddEntry records a credit (kind KindCredit) or an adjustment
// (KindAdjustment) for a customer, in the customer's currency, and moves
// the balance in the same transaction. It returns ENotFound for an unknown
// customer, EInvalid for a bad amount (a credit must be positive, an
// adjustment non-zero; finer than the currency's minor unit without
// in.AllowSubMinor), an effective_at more than 5 minutes ahead of the
// ledger's clock, or an idempotency key with a prefix the ledger
// keeps for itself (refund:, reverse:). A request reusing an idempotency
// key gets the entry first made with it when it asks for the same entry
// (customer, kind, amount, memo and, when given, effective_at), even when
// the two race; otherwise EConflict.
func (s *Store) AddEntry(ctx context.Context, customerID, kind string, in EntryInput) (Entry, error) {
	micros, err := ParseSignedMicros("amount", in.Amount)
	if err == nil {
		err = checkTime("effective_at", &in.EffectiveAt)
	}
	if err == nil {
		err = checkText("idempotency_key", in.IdempotencyKey, MaxIdempotencyKeyLen)
	}
	switch {
	case err != nil:
		return Entry{}, err
	case kind != KindCredit && kind != KindAdjustment:
		return Entry{}, errorf(EInvalid, "kind %q is not credit or adjustment", kind)
	case kind == KindCredit && micros <= 0:
		return Entry{}, errorf(EInvalid, "amount: a credit must be positive, got %q", in.Amount)
	case micros == 0:
		return Entry{}, errorf(EInvalid, "amount: an adjustment must not be zero")
	case in.EffectiveAt.After(s.now().Add(maxEntryAhead)):
		// The balance (and so the customer's budget) moves when the entry
		// is recorded: a credit dated ahead would be spendable before it is
		// effective, and the month it is dated in would list money that was
		// spent in another.
		return Entry{}, errorf(EInvalid, "effective_at: %s is in the future; an entry moves the balance when it is recorded, so it may be dated back, not ahead",
			in.EffectiveAt.UTC().Format(time.RFC3339Nano))
	case strings.HasPrefix(in.IdempotencyKey, refundKeyPrefix) || strings.HasPrefix(in.IdempotencyKey, reverseKeyPrefix):
		return Entry{}, errorf(EInvalid, "idempotency_key: %q starts with %s or %s, which the ledger keeps for refunds and reversals",
			in.IdempotencyKey, refundKeyPrefix, reverseKeyPrefix)
	}
	n := newEntry{customerID: customerID, kind: kind, amountE12: decimal.New(micros, 6), // e12 units
		effectiveAt: in.EffectiveAt, explicitAt: !in.EffectiveAt.IsZero(),
		key: in.IdempotencyKey, memo: strings.TrimSpace(in.Memo), strict: true}
	if !in.AllowSubMinor {
		n.before = func(ctx context.Context, tx pgx.Tx, _ *newEntry) error {
			return checkMinorUnit(ctx, tx, customerID, in.Amount, micros)
		}
	}
	if !n.explicitAt {
		n.effectiveAt = s.now()
	}
	return s.insertEntry(ctx, n)
}

// checkMinorUnit refuses, EInvalid, an amount of micros (typed as amount)
// finer than the minor unit of the customer's currency (ISO 4217's, as
// MinorUnit has it): 0.001 USD, a tenth of a cent no payment can carry, or
// 10.005 JPY, likely 10,005 yen written with a thousands separator. An
// unknown customer passes (the insert says it is not found).
func checkMinorUnit(ctx context.Context, tx pgx.Tx, customerID, amount string, micros int64) error {
	var code string
	err := tx.QueryRow(ctx, `SELECT currency FROM customers WHERE id = $1`, customerID).Scan(&code)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	scale, _ := MinorUnit(code)
	if scale >= 6 || micros%decimal.New(1, int32(6-scale)).IntPart() == 0 {
		return nil
	}
	return errorf(EInvalid, "amount: %s is finer than the currency's minor unit (ISO 4217): %s's minor unit is %s (%d decimal places); "+
		"check it (write no thousands separator), or send allow_sub_minor: true (tollgate credits grant or adjust with --allow-sub-minor) to record it as typed",
		strings.TrimSpace(amount), code, decimal.New(1, -int32(scale)).String(), scale)
}

// insertEntry writes one entry and moves the balance, idempotently on
// n.key: a retry, or a request that lost the race to insert the same key,
// gets the entry made first, or EConflict when it asked for another.
func (s *Store) insertEntry(ctx context.Context, n newEntry) (Entry, error) {
	if err := checkText("memo", n.memo, MaxMemoLen); err != nil {
		return Entry{}, err
	}
	if n.key != "" {
		if e, err := s.entryByKey(ctx, n.key); err == nil {
			if !strings.EqualFold(e.CustomerID, n.customerID) {
				// An unknown customer is ENotFound, whatever its key.
				if _, err := s.Customer(ctx, n.customerID); err != nil {
					return Entry{}, err
				}
			}
			return n.replay(e)
		}
	}
	var e Entry
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if n.before != nil {
			if err := n.before(ctx, tx, &n); err != nil {
				return err
			}
		}
		amountE12 := n.amountE12
		row := tx.QueryRow(ctx, `
			INSERT INTO ledger_entries (customer_id, kind, amount_e12, currency, effective_at, event_id,
			  reverses, idempotency_key, memo)
			SELECT id, $2, $3, coalesce(NULLIF($9, ''), currency), $4, NULLIF($5, '')::uuid, NULLIF($6, 0), NULLIF($7, ''), $8
			FROM customers WHERE id = $1
			RETURNING `+entryColumns, n.customerID, n.kind, amountE12.String(), n.effectiveAt, n.eventID,
			n.reverses, n.key, n.memo, n.currency)
		var err error
		if e, err = scanEntry(row); err != nil {
			return err
		}
		field := "credits_e12"
		if amountE12.IsNegative() {
			field, amountE12 = "charges_e12", amountE12.Neg()
		}
		var balance string
		err = tx.QueryRow(ctx, `
			INSERT INTO customer_balances (customer_id, currency, `+field+`) VALUES ($1, $2, $3)
			ON CONFLICT (customer_id, currency) DO UPDATE SET `+field+` = customer_balances.`+field+` + EXCLUDED.`+field+`
			RETURNING (credits_e12 - charges_e12)::text`,
			n.customerID, e.Currency, amountE12.String()).Scan(&balance)
		if err != nil {
			return err
		}
		if err := checkBalance(balance, n.amountE12); err != nil {
			return err
		}
		_, err = outbox(ctx, tx, "customer", n.customerID) // the balance moved: the budget state may flip
		return err
	})
	if isCode(err, "23505") && n.key != "" { // a concurrent request with the key won the race
		first, err := s.entryByKey(ctx, n.key)
		if err != nil {
			return Entry{}, err
		}
		return n.replay(first)
	}
	if le := (*Error)(nil); errors.As(err, &le) {
		return e, err // n.before's refusal, which names its field
	}
	return e, dbError(err, "customer "+n.customerID)
}

// maxBalanceE12 is the most a customer's balance may be, either way, after
// an entry that moves it away from zero: 2^62 micro-units (4,611,686,018,427.387904
// currency units), the most one amount may be (ParseSignedMicros).
var maxBalanceE12 = decimal.New(1<<62, 6)

// checkBalance refuses, EInvalid, an entry of amountE12 that left the
// balance (balanceE12, 1e-12 units, as Postgres's numeric text) past
// maxBalanceE12 and further from zero than before it. Such a balance
// means nothing for a real customer, and the sums the gateways' states
// are made of would outgrow int64. An entry towards zero (a refund, a
// reversal, a charge) is never refused.
func checkBalance(balanceE12 string, amountE12 decimal.Decimal) error {
	after, err := decimal.NewFromString(balanceE12)
	if err != nil {
		return fmt.Errorf("balance %q: %w", balanceE12, err)
	}
	if after.Abs().LessThanOrEqual(maxBalanceE12) || after.Sub(amountE12).Abs().GreaterThanOrEqual(after.Abs()) {
		return nil
	}
	return errorf(EInvalid, "amount: the customer's balance would be %s, past ±%s, the most the ledger keeps",
		after.Shift(-12).String(), maxBalanceE12.Shift(-12).String())
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
// by mistake, say): the same amount, negated, in its currency, once: a
// second reversal of the entry is the first one. It returns ENotFound for
// an unknown entry and EConflict for one that is itself a reversal, or a
// rerate entry: that is part of its event's charge, which RefundEvent and
// Rerate compute from the event and its rerate entries alone, so a
// reversal of it beside them would give the customer the correction twice.
func (s *Store) Reverse(ctx context.Context, id int64, memo string) (Entry, error) {
	orig, err := scanEntry(s.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM ledger_entries WHERE id = $1`, id))
	if err != nil {
		return Entry{}, dbError(err, "entry")
	}
	if orig.Reverses != 0 {
		return Entry{}, errorf(EConflict, "entry %d is itself a reversal", id)
	}
	if orig.Kind == KindRerate {
		return Entry{}, errorf(EConflict, "entry %d re-rates event %s and is part of its charge: refund the event "+
			"(POST /admin/v1/events/%s/refund) or re-rate it again instead", id, orig.EventID, orig.EventID)
	}
	amount, _ := decimal.NewFromString(orig.Amount)
	return s.insertEntry(ctx, newEntry{customerID: orig.CustomerID, kind: KindRefund, amountE12: amount.Shift(12).Neg(),
		currency: orig.Currency, effectiveAt: s.now(), reverses: id,
		key: reverseKeyPrefix + strconv.FormatInt(id, 10), memo: strings.TrimSpace(memo)})
}

// RefundEvent records a refund entry giving back what an event was charged
// (its cost: after discounts and any re-rating), in the currency it was
// charged in, once per event: a second refund of the event is the first
// one. It returns ENotFound for an unknown event and EConflict for one
// charged nothing, whose cost changed (by re-rating) since its refund, or
// whose refund was reversed (a replay of it would move no money).
func (s *Store) RefundEvent(ctx context.Context, eventID, memo string) (Entry, error) {
	id, customer, amount, cur, err := eventCharge(ctx, s.pool, eventID)
	if err != nil {
		return Entry{}, err
	}
	e, err := s.insertEntry(ctx, newEntry{customerID: customer, kind: KindRefund, amountE12: amount, currency: cur,
		effectiveAt: s.now(), eventID: id, key: refundKeyPrefix + id, memo: strings.TrimSpace(memo),
		before: func(ctx context.Context, tx pgx.Tx, n *newEntry) error {
			// Under the rerate lock, the charge again: a re-rating that
			// committed since the read above changed what is given back,
			// and one that comes after sees this refund and leaves the
			// event alone.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('rerate'))`); err != nil {
				return err
			}
			var err error
			_, _, n.amountE12, n.currency, err = eventCharge(ctx, tx, id)
			return err
		}})
	if err == nil && e.Kind != KindRefund {
		return Entry{}, errorf(EConflict, "event %s: idempotency clash", eventID)
	}
	if ErrorCode(err) == EConflict {
		// The event's refund exists with another amount: its cost was
		// re-rated since. Say what happened to that refund, not that a
		// key clashed (found by review).
		var first, reversal int64
		switch rerr := s.pool.QueryRow(ctx, `SELECT f.id, coalesce(r.id, 0) FROM ledger_entries f
			LEFT JOIN ledger_entries r ON r.reverses = f.id WHERE f.idempotency_key = $1`, refundKeyPrefix+id).Scan(&first, &reversal); {
		case rerr != nil:
		case reversal != 0:
			return Entry{}, errorf(EConflict, "event %s was refunded by entry %d, which entry %d reversed: an event is refunded once",
				eventID, first, reversal)
		default:
			return Entry{}, errorf(EConflict, "event %s was refunded by entry %d, and re-rated since: an event is refunded once; "+
				"settle the difference with an adjustment", eventID, first)
		}
	}
	if err == nil { // the event's refund, new or the first one: answered as it stands
		var reversal int64
		rerr := s.pool.QueryRow(ctx, `SELECT id FROM ledger_entries WHERE reverses = $1`, e.ID).Scan(&reversal)
		switch {
		case rerr == nil:
			return Entry{}, errorf(EConflict, "event %s was refunded by entry %d, which entry %d reversed: an event is refunded once",
				eventID, e.ID, reversal)
		case !errors.Is(rerr, pgx.ErrNoRows):
			return Entry{}, dbError(rerr, "entry")
		}
	}
	return e, err
}

// eventCharge reads what event eventID is charged now (its cost after
// discount and re-rating, e12 units, positive) and in what currency, with
// its id as stored and its customer's. It returns ENotFound for an unknown
// event and EConflict for one charged nothing.
func eventCharge(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, eventID string) (id, customer string, amount decimal.Decimal, currency string, err error) {
	var charge string
	err = q.QueryRow(ctx, `
		SELECT e.id::text, e.customer_id::text, (e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001 - coalesce(r.amount, 0))::text,
		  coalesce(r.currency, e.currency)
		FROM usage_events e LEFT JOIN LATERAL (SELECT max(currency) AS currency, sum(amount_e12) AS amount
		  FROM ledger_entries WHERE event_id = e.id AND kind = 'rerate') r ON true
		WHERE e.id = $1`, eventID).Scan(&id, &customer, &charge, &currency)
	if err != nil {
		return "", "", decimal.Decimal{}, "", dbError(err, "event "+eventID)
	}
	amount, _ = decimal.NewFromString(charge)
	if !amount.IsPositive() {
		return "", "", decimal.Decimal{}, "", errorf(EConflict, "event %s was charged nothing", eventID)
	}
	return id, customer, amount, currency, nil
}

// Entries lists a customer's entries effective in [from, to) (a zero to:
// no end), oldest first: every entry that moves its balance, rerate
// entries included. Over all time, in the customer's currency,
//
//	balance = Σ amount(entries) − Σ charge(events, as first rated)
//	        = Σ amount(entries other than rerate) − Σ cost(usage)
//
// since a rerate entry's amount is minus the change it made to its event's
// cost. It returns ENotFound for an unknown customer and EInvalid when
// from is not before to.
func (s *Store) Entries(ctx context.Context, customerID string, from, to time.Time) ([]Entry, error) {
	return s.entries(ctx, customerID, from, to, 0)
}

// LatestEntries is Entries kept to the latest n (above 0) of the range:
// the n effective last (of those at one instant, the highest ids), still
// oldest first. Only those are read, however many the range holds.
func (s *Store) LatestEntries(ctx context.Context, customerID string, from, to time.Time, n int) ([]Entry, error) {
	if n < 1 {
		return nil, errorf(EInvalid, "n: %d is not above 0", n)
	}
	return s.entries(ctx, customerID, from, to, n)
}

// Entry pages: the number of entries a page holds when no limit is asked
// for, and the most a limit may ask for.
const (
	DefaultEntryLimit = 1000
	MaxEntryLimit     = 10000
)

// EntryPage is one page of a customer's entries, oldest first.
// NextCursor, "" on the last page, continues with the entries before
// Data[0]: pages go back in time from the latest.
type EntryPage struct {
	Data       []Entry `json:"data"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// EntriesPage is Entries one page at a time: the latest limit entries (0:
// DefaultEntryLimit; at most MaxEntryLimit) of [from, to) (zero to: no end)
// that come before cursor (a NextCursor it returned; "": the range's end),
// in the order (effective_at, id). Only those are read, however many the
// range holds; entries added while a client pages do not shift its pages.
// Its first page with limit n is LatestEntries(n). It returns ENotFound for
// an unknown customer, and EInvalid when from is not before to, for a
// limit out of range, or for a cursor it did not return.
func (s *Store) EntriesPage(ctx context.Context, customerID string, from, to time.Time, limit int, cursor string) (EntryPage, error) {
	if limit == 0 {
		limit = DefaultEntryLimit
	}
	if limit < 1 || limit > MaxEntryLimit {
		return EntryPage{}, errorf(EInvalid, "limit: %d is not between 1 and %d", limit, MaxEntryLimit)
	}
	beforeAt, beforeID := time.Time{}, int64(math.MaxInt64) // no cursor: the range's end
	if cursor != "" {
		var err error
		if beforeAt, beforeID, err = decodeEntryCursor(cursor); err != nil {
			return EntryPage{}, err
		}
	}
	es, err := s.entriesBefore(ctx, customerID, from, to, limit+1, beforeAt, beforeID)
	if err != nil {
		return EntryPage{}, err
	}
	page := EntryPage{Data: es}
	if len(es) > limit { // oldest first: the first is one too many, and older ones follow
		page.Data = es[1:]
		first := page.Data[0]
		page.NextCursor = base64.RawURLEncoding.EncodeToString(
			[]byte(first.EffectiveAt.UTC().Format(time.RFC3339Nano) + " " + strconv.FormatInt(first.ID, 10)))
	}
	return page, nil
}

// decodeEntryCursor returns the effective time and id of the entry a page
// of EntriesPage began with.
func decodeEntryCursor(c string) (time.Time, int64, error) {
	bad := errorf(EInvalid, "cursor: %q is not a cursor this API returned", c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, 0, bad
	}
	at, id, ok := strings.Cut(string(b), " ")
	t, terr := time.Parse(time.RFC3339Nano, at)
	n, nerr := strconv.ParseInt(id, 10, 64)
	if !ok || terr != nil || nerr != nil || n < 1 {
		return time.Time{}, 0, bad
	}
	return t, n, nil
}

// entries is Entries kept to the latest n when n is above 0.
func (s *Store) entries(ctx context.Context, customerID string, from, to time.Time, n int) ([]Entry, error) {
	if n > 0 {
		return s.entriesBefore(ctx, customerID, from, to, n, time.Time{}, math.MaxInt64)
	}
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !from.Before(to) {
		return nil, errorf(EInvalid, "from must be before to")
	}
	from, to = ceilMicrosecond(from), ceilMicrosecond(to) // the stored times of [from, to): see Store.Usage
	if _, err := s.Customer(ctx, customerID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM ledger_entries
		WHERE customer_id = $1 AND effective_at >= $2 AND effective_at < $3
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

// entriesBefore is the latest n entries of [from, to) before (beforeAt,
// beforeID) in the order (effective_at, id) (a zero beforeAt: the range's
// end), oldest first.
func (s *Store) entriesBefore(ctx context.Context, customerID string, from, to time.Time, n int, beforeAt time.Time, beforeID int64) ([]Entry, error) {
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !from.Before(to) {
		return nil, errorf(EInvalid, "from must be before to")
	}
	from, to = ceilMicrosecond(from), ceilMicrosecond(to) // the stored times of [from, to): see Store.Usage
	if beforeAt.IsZero() {
		beforeAt = to
	}
	if _, err := s.Customer(ctx, customerID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM ledger_entries
		WHERE customer_id = $1 AND effective_at >= $2 AND effective_at < $3 AND (effective_at, id) < ($5, $6)
		ORDER BY effective_at DESC, id DESC LIMIT $4`, customerID, from, to, n, beforeAt, beforeID)
	if err != nil {
		return nil, dbError(err, "entries")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) { return scanEntry(r) })
	if out == nil {
		out = []Entry{}
	}
	slices.Reverse(out)
	return out, dbError(err, "entries")
}
