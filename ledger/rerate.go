package ledger

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// RerateResult counts what Rerate did.
type RerateResult struct {
	// Examined is how many events of the period were looked at.
	Examined int `json:"examined"`
	// Adjusted is how many got a rerate entry (their charge or their list
	// cost changed).
	Adjusted int `json:"adjusted"`
	// Priced is how many of those were unpriced until now.
	Priced int `json:"priced"`
	// StillUnpriced is how many have no price in force even now.
	StillUnpriced int `json:"still_unpriced"`
	// CurrencyConflicts is how many would change currency: those need a
	// manual adjustment and are left alone.
	CurrencyConflicts int `json:"currency_conflicts"`
	// Refunded is how many were refunded in full (RefundEvent): a refund
	// is final, so they are left alone.
	Refunded int `json:"refunded"`
}

// RerateProgress is a re-rating's progress after one of its batches: what
// the committed batches did, and Through, the time before which every
// event of the range has been re-rated (the range's start until the first
// batch commits).
type RerateProgress struct {
	RerateResult
	Through time.Time `json:"through"`
}

// rerateBatch is how many events one re-rating transaction covers.
const rerateBatch = 2000

// rerateWindow is the time window a re-rating batch first reads from
// (through usage_events' BRIN index on occurred_at, migration 9). Each
// batch reads the events of its window and sorts them, so the window
// follows the events' density: halved after a full batch, doubled after
// one that filled less than half.
const rerateWindow = time.Hour

// maxUUID follows every id: a batch that starts after (t, maxUUID) starts
// at the first event after t.
const maxUUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"

// Rerate re-rates the events in [from, to) with the price book and
// overrides as they are now (after, say, a missing price was added), never
// changing an event: each event whose charge or list cost (before
// discount) changes gets a rerate entry with the differences (amount:
// minus the charge's, cost_e12: the list cost's; effective at the event's
// time, so it lands in the event's period), and the rollups (charge_e12
// and cost_e12) and balances move with it in the same transaction.
// Re-rating again changes nothing more: it is idempotent, and runs at the
// same time take their batches in turn.
// progress, when not nil, is called after each batch (a window with no
// events included), on the caller's goroutine. It returns EInvalid
// when from is not before to, and EConflict naming the event when the
// price book cannot rate an event (a cost beyond int64): the batches before
// its batch are committed, and the result counts them.
func (s *Store) Rerate(ctx context.Context, from, to time.Time, progress func(RerateProgress)) (RerateResult, error) {
	var res RerateResult
	if !from.Before(to) {
		return res, errorf(EInvalid, "from must be before to")
	}
	// Stored times are whole microseconds, and pgx drops a bound's
	// nanoseconds: rounded up, the bounds select the events of [from, to).
	from, to = ceilMicrosecond(from), ceilMicrosecond(to)
	afterT, afterID := from.Add(-time.Microsecond), maxUUID
	window := rerateWindow
	for {
		// The batch's window: the events after (afterT, afterID) and before
		// upper. Its end is also where the next batch starts when this one
		// is not full.
		upper := to
		if w := afterT.Add(window); w.Before(to) {
			upper = w
		}
		n, done := 0, res // done: what committed batches did
		var lastT time.Time
		var lastID string
		err := retryDeadlock(func() error {
			res = done
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				// One re-rating batch at a time, whatever the ranges: a batch
				// reads each event's charge so far (its rerate entries
				// included) after the lock, so it sees what another run has
				// committed, and two runs at once (a retry after a timeout, two
				// operators) charge a difference once, not twice.
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('rerate'))`); err != nil {
					return err
				}
				// A batch's statements are small and many; compiling them
				// (JIT, on by default, for plans whose estimated cost passes
				// jit_above_cost) took longer than running them.
				if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
					return err
				}
				evs, err := rerateLoad(ctx, tx, afterT, afterID, from, upper)
				if err != nil || len(evs) == 0 {
					return err
				}
				n = len(evs)
				lastT, lastID = evs[n-1].e.Time, evs[n-1].e.ID
				events := make([]usage.Event, len(evs))
				for i := range evs {
					events[i] = evs[i].e
				}
				p, err := loadPricing(ctx, tx, events)
				if err != nil {
					return err
				}
				adjusted := res.Adjusted
				keys, customers := map[string]bool{}, map[string]bool{}
				// The key spend lock, shared, before the first write (see
				// spendLockKey), in the same round trip.
				var writes pgx.Batch
				writes.Queue(spendLockShared)
				moved := newRerateMoves()
				for i := range evs {
					if err := rerateOne(&writes, moved, p, &evs[i], &res); err != nil {
						return err
					}
					if res.Adjusted > adjusted {
						adjusted = res.Adjusted
						keys[evs[i].e.KeyID], customers[evs[i].e.CustomerID] = true, true
					}
				}
				if len(keys) > 0 {
					// The keys' spend rows first, as the meter's batch takes
					// them before the balances and the rollups.
					writes.Queue(lockKeySpendSQL, slices.Sorted(maps.Keys(keys)))
				}
				moved.queue(&writes)
				// The batch's writes go in one round trip (pipelined, in
				// order): one statement at a time, the round trips were most
				// of a re-rating's time.
				if writes.Len() > 1 {
					if err := tx.SendBatch(ctx, &writes).Close(); err != nil {
						return err
					}
				}
				if len(keys) == 0 {
					return nil
				}
				// The keys' spend rows are locked (above): spendMoved's
				// recomputation and outbox, without its lock.
				keyIDs := slices.Sorted(maps.Keys(keys))
				if err := recomputeKeySpend(ctx, tx, keyIDs); err != nil {
					return err
				}
				return outboxAll(ctx, tx, keyIDs, slices.Sorted(maps.Keys(customers)))
			})
		})
		if err != nil {
			return done, fmt.Errorf("rerate: %w", err)
		}
		res.Examined += n
		through := upper // every event before the window's end is done
		switch {
		case n == rerateBatch: // the window holds more: the next batch starts after this one's last event
			afterT, afterID = lastT, lastID
			window = max(window/2, time.Millisecond)
			through = lastT // events at lastT after lastID are not
		case upper.Equal(to):
		default: // the window is done: the next starts at its end
			afterT, afterID = upper.Add(-time.Microsecond), maxUUID
			if n < rerateBatch/2 && window < to.Sub(from) {
				window = min(window, math.MaxInt64/2) * 2
			}
		}
		if progress != nil {
			progress(RerateProgress{RerateResult: res, Through: through})
		}
		if n < rerateBatch && upper.Equal(to) {
			return res, nil
		}
	}
}

// retryDeadlock runs batch, a transaction, again when Postgres chose it
// as a deadlock's victim (40P01), up to 3 times: its locks are taken in
// the meter's order (rerateMoves), but a deadlock with another writer is
// answered by a retry of the batch, not a re-rating stopped with 500.
func retryDeadlock(batch func() error) error {
	for attempt := 1; ; attempt++ {
		err := batch()
		if !isCode(err, "40P01") || attempt == 3 {
			return err
		}
	}
}

// rerateEvent is a stored event and what it is charged now.
type rerateEvent struct {
	e        usage.Event
	currency string          // "" while unpriced
	charge   decimal.Decimal // e12 units, after discounts and earlier re-ratings
	cost     decimal.Decimal // list cost, e12 units, after earlier re-ratings
	unpriced bool            // unpriced when stored and never priced since
	refunded bool            // refunded in full (RefundEvent)
}

// rerateLoadQuery is rerateLoad's: $1, $2 the last event read (its time
// and id), $3 and $4 the batch's window, $5 its size.
const rerateLoadQuery = `
		SELECT e.id, e.occurred_at, e.customer_id, e.key_id, e.model, e.status, e.prompt_tokens, e.cached_tokens,
		  e.cache_write_tokens, e.completion_tokens, e.reasoning_tokens, e.web_search_requests,
		  coalesce(r.currency, e.currency),
		  (e.cost_e12::numeric * (10000 - e.discount_bp) * 0.0001 - coalesce(r.amount, 0))::text,
		  (e.cost_e12 + coalesce(r.cost, 0))::text, e.unpriced AND r.currency IS NULL, coalesce(r.refunded, false)
		FROM usage_events e
		LEFT JOIN LATERAL (SELECT max(currency) FILTER (WHERE kind = 'rerate') AS currency,
		    sum(amount_e12) FILTER (WHERE kind = 'rerate') AS amount, sum(cost_e12) FILTER (WHERE kind = 'rerate') AS cost,
		    bool_or(kind = 'refund' AND NOT EXISTS (SELECT 1 FROM ledger_entries x WHERE x.reverses = f.id)) AS refunded
		  FROM ledger_entries f WHERE f.event_id = e.id AND f.kind IN ('rerate', 'refund')) r ON true
		WHERE (e.occurred_at, e.id) > ($1, $2::uuid) AND e.occurred_at >= $1 AND e.occurred_at >= $3 AND e.occurred_at < $4
		ORDER BY e.occurred_at, e.id LIMIT $5`

// rerateLoad reads the batch after (afterT, afterID) in [from, to), with
// each event's charge so far and whether it was refunded, both read from
// the event's own ledger entries (by ledger_entries_event_idx). It is
// planned at each call, not as a prepared statement's generic plan: a
// plan made while ledger_entries was near empty (a first re-rating) read
// it whole for every event as the re-rating itself filled it. (The
// refund was an EXISTS that Postgres ran as one read of every entry per
// batch, and its cost estimate, growing with the table, had each batch
// JIT-compiled: 366 ms of a 409 ms batch at 16,000 entries.)
func rerateLoad(ctx context.Context, tx pgx.Tx, afterT time.Time, afterID string, from, to time.Time) ([]rerateEvent, error) {
	rows, err := tx.Query(ctx, rerateLoadQuery, pgx.QueryExecModeExec, afterT, afterID, from, to, rerateBatch)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (rerateEvent, error) {
		var r rerateEvent
		var charge, cost string
		u := &r.e.Usage
		err := row.Scan(&r.e.ID, &r.e.Time, &r.e.CustomerID, &r.e.KeyID, &r.e.Model, &r.e.Status, &u.PromptTokens, &u.CachedTokens,
			&u.CacheWriteTokens, &u.CompletionTokens, &u.ReasoningTokens, &u.WebSearchRequests, &r.currency, &charge, &cost,
			&r.unpriced, &r.refunded)
		if err == nil {
			r.charge, err = decimal.NewFromString(charge)
		}
		if err == nil {
			r.cost, err = decimal.NewFromString(cost)
		}
		return r, err
	})
}

// chargeOf is cost × (10000 − discount) / 10000, exact (e12 units).
func chargeOf(cost int64, discountBP int32) decimal.Decimal {
	return decimal.New(cost, 0).Mul(decimal.New(int64(10000-discountBP), -4)) // exact: no division
}

// rerateOne rates ev again and queues on w its rerate entry, and adds to
// moved what moves its rollup and its customer's balance.
func rerateOne(w *pgx.Batch, moved *rerateMoves, p *pricing, ev *rerateEvent, res *RerateResult) error {
	if ev.refunded {
		// Its charge was given back whole: a new price neither credits
		// the customer again nor bills an event it was told was free.
		res.Refunded++
		return nil
	}
	r, err := p.rate(&ev.e)
	switch {
	case err != nil:
		// The price book cannot rate it (its cost is beyond int64): the
		// operator's to settle, not an internal error.
		return errorf(EConflict, "%v; re-rating stopped there (events before it may be re-rated): "+
			"adjust the event by hand and re-rate around it", err)
	case r.Unpriced:
		res.StillUnpriced++
		return nil
	case ev.currency != "" && r.Currency != ev.currency:
		res.CurrencyConflicts++
		return nil
	}
	charge := chargeOf(r.CostE12, r.DiscountBP)
	// The list cost moves too (the Billing dashboard's list cost, and
	// reconciliation, read usage_hourly.cost_e12), even where the charge
	// does not (a 100% discount).
	delta, costDelta := charge.Sub(ev.charge), decimal.New(r.CostE12, 0).Sub(ev.cost)
	if delta.IsZero() && costDelta.IsZero() && ev.currency != "" {
		return nil
	}
	res.Adjusted++
	hour := ev.e.Time.UTC().Truncate(time.Hour)
	w.Queue(`
		INSERT INTO ledger_entries (customer_id, kind, amount_e12, cost_e12, currency, effective_at, event_id, key_id, model,
		  price_id, override_id, discount_bp, memo)
		VALUES ($1, 'rerate', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 're-rated')`,
		ev.e.CustomerID, delta.Neg().String(), costDelta.String(), r.Currency, ev.e.Time, ev.e.ID, ev.e.KeyID, ev.e.Model,
		r.PriceID, r.OverrideID, r.DiscountBP)
	row := rollupRow{customer: ev.e.CustomerID, hour: hour, key: ev.e.KeyID, model: ev.e.Model, currency: r.Currency}
	if ev.unpriced {
		// First priced: the event's counts move from the unpriced row to
		// its currency's row (an unpriced event's list cost is 0, so
		// costDelta is r.CostE12).
		res.Priced++
		unpriced := row
		unpriced.currency = ""
		moved.rollup(unpriced, -1, -1, ev.e.Usage, decimal.Zero, decimal.Zero)
		moved.rollup(row, 1, 0, ev.e.Usage, decimal.New(r.CostE12, 0), charge)
	} else {
		moved.rollup(row, 0, 0, usage.Tokens{}, costDelta, delta)
	}
	moved.balance(ev.e.CustomerID, r.Currency, delta)
	return nil
}

// rollupRow is a usage_hourly row's key.
type rollupRow struct {
	customer string
	hour     time.Time
	key      string
	model    string
	currency string
}

// rollupMove is what a re-rating batch adds to one usage_hourly row.
type rollupMove struct {
	requests, unpriced int64
	usage              usage.Tokens
	cost, charge       decimal.Decimal // e12 units
}

// rerateMoves sums what a re-rating batch moves in each rollup row and
// each balance, so that queue writes them as the meter's batches do: the
// rollups in key order, then the balances in key order, each one
// statement. Written event by event, in the events' time order, a batch
// held one customer's balance and then waited for another rollup row of
// that customer (or its key spend) that a meter batch held while it
// waited for that balance: Postgres found a deadlock, 163 in 25 minutes
// of a re-rating under load, the re-rating answered 500 and the meter
// stalled up to 25 s (an operators' load test).
type rerateMoves struct {
	rollups  map[rollupRow]*rollupMove
	balances map[[2]string]decimal.Decimal // (customer, currency)
}

func newRerateMoves() *rerateMoves {
	return &rerateMoves{rollups: map[rollupRow]*rollupMove{}, balances: map[[2]string]decimal.Decimal{}}
}

// rollup adds to row: requests and unpriced requests, usage times sign
// (requests' sign: -1, 0 or 1), cost and charge.
func (m *rerateMoves) rollup(row rollupRow, requests, unpriced int64, u usage.Tokens, cost, charge decimal.Decimal) {
	mv := m.rollups[row]
	if mv == nil {
		mv = &rollupMove{cost: decimal.Zero, charge: decimal.Zero}
		m.rollups[row] = mv
	}
	sign := requests
	if sign == 0 {
		u = usage.Tokens{}
	}
	mv.requests += requests
	mv.unpriced += unpriced
	mv.usage.PromptTokens += sign * u.PromptTokens
	mv.usage.CachedTokens += sign * u.CachedTokens
	mv.usage.CacheWriteTokens += sign * u.CacheWriteTokens
	mv.usage.CompletionTokens += sign * u.CompletionTokens
	mv.usage.ReasoningTokens += sign * u.ReasoningTokens
	mv.usage.WebSearchRequests += sign * u.WebSearchRequests
	mv.cost, mv.charge = mv.cost.Add(cost), mv.charge.Add(charge)
}

// balance adds charge to the customer's charges in currency.
func (m *rerateMoves) balance(customer, currency string, charge decimal.Decimal) {
	k := [2]string{customer, currency}
	m.balances[k] = m.balances[k].Add(charge)
}

// queue queues the balances' statement, then the rollups', each ordered
// by its table's key in SQL, as the meter's batch statement takes them
// (event_columns.go: its balanced CTE runs as the key outbox's reads it,
// its rolled CTE, which nothing reads, at the statement's end), so that
// both take the rows' locks in one order.
func (m *rerateMoves) queue(w *pgx.Batch) {
	if len(m.balances) > 0 {
		cust, currency, charge := make([]string, 0, len(m.balances)), make([]string, 0, len(m.balances)), make([]string, 0, len(m.balances))
		for k, v := range m.balances {
			cust, currency, charge = append(cust, k[0]), append(currency, k[1]), append(charge, v.String())
		}
		w.Queue(`
			INSERT INTO customer_balances (customer_id, currency, charges_e12)
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::numeric[]) ORDER BY 1, 2
			ON CONFLICT (customer_id, currency) DO UPDATE SET charges_e12 = customer_balances.charges_e12 + EXCLUDED.charges_e12`,
			cust, currency, charge)
	}
	if len(m.rollups) > 0 {
		n := len(m.rollups)
		cust, key := make([]string, 0, n), make([]string, 0, n)
		hour := make([]time.Time, 0, n)
		model, currency, cost, charge := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		var counts [8][]int64
		for row, mv := range m.rollups {
			cust, hour, key, model, currency = append(cust, row.customer), append(hour, row.hour), append(key, row.key),
				append(model, row.model), append(currency, row.currency)
			u := mv.usage
			for i, v := range [8]int64{mv.requests, mv.unpriced, u.PromptTokens, u.CachedTokens, u.CacheWriteTokens,
				u.CompletionTokens, u.ReasoningTokens, u.WebSearchRequests} {
				counts[i] = append(counts[i], v)
			}
			cost, charge = append(cost, mv.cost.String()), append(charge, mv.charge.String())
		}
		w.Queue(`
			INSERT INTO usage_hourly
			SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
			  $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::numeric[], $15::numeric[])
			ORDER BY 1, 2, 3, 4, 5 `+rollupAdd,
			cust, hour, key, model, currency, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6],
			counts[7], cost, charge)
	}
}
