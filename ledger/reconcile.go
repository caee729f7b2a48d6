package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Reconciliation is what Reconcile found. Clean is true when the ledger
// agrees with itself: no rollup or balance mismatch, every event has its
// one id, and every rerate entry its event. Unpriced events and rejected duplicates are reported but do
// not make it unclean: they are facts to act on (add a price and re-rate;
// watch redeliveries), not inconsistencies; so are events of an unknown
// customer or of another customer's key. Amounts are exact decimal
// strings in currency units.
type Reconciliation struct {
	// From and To are the range checked, widened to whole hours (UTC).
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Clean bool      `json:"clean"`
	// Events and EventIDs count the events and the dedupe keys in range.
	Events   int64 `json:"events"`
	EventIDs int64 `json:"event_ids"`
	// Attempts counts the attempts not charged (usage_attempts) in range,
	// whose ids event_ids holds too: Events + Attempts = EventIDs.
	Attempts int64 `json:"attempts"`
	// EventsWithoutID counts events whose (id, occurred_at) is not in
	// event_ids; IDsWithoutEvent the reverse; DuplicateIDs the ids stored
	// as more than one event (in any partition).
	EventsWithoutID int64 `json:"events_without_id"`
	IDsWithoutEvent int64 `json:"ids_without_event"`
	DuplicateIDs    int64 `json:"duplicate_ids"`
	// RerateEntriesWithoutEvent counts the rerate entries effective in
	// range whose event is not stored at that time for that customer: a
	// re-rating dates its entry at its event's time and moves that hour's
	// rollup with it, so such an entry was written another way (by hand).
	// The rollups and balances do not hold it, while an export's charges
	// and the event's cost do, so they would disagree with the statement.
	RerateEntriesWithoutEvent int64 `json:"rerate_entries_without_event"`
	// RollupMismatches lists (at most MaxListed of RollupMismatchCount)
	// hourly rollup rows that differ from the events and rerate entries.
	RollupMismatches    []RollupMismatch `json:"rollup_mismatches"`
	RollupMismatchCount int64            `json:"rollup_mismatch_count"`
	// BalanceMismatches lists customer_balances rows that differ from the
	// entries and events, over all time (balances are running totals).
	BalanceMismatches []BalanceMismatch `json:"balance_mismatches"`
	// Unpriced counts the events in range still without a price (not
	// priced since by a rerate entry), by model: at most MaxListed models,
	// those of the most events first (then by name). UnpricedModels
	// counts every such model, UnpricedEvents sums the events of them all.
	// (A client chooses model names, under a prefix route: the list was
	// as long as it made it.)
	Unpriced       []UnpricedModel `json:"unpriced"`
	UnpricedModels int64           `json:"unpriced_models"`
	UnpricedEvents int64           `json:"unpriced_events"`
	// DuplicatesRejected is how many deliveries the ledger has refused as
	// duplicates, over all time (ingest_counters).
	DuplicatesRejected int64 `json:"duplicates_rejected"`
	// UnknownCustomerEvents counts the events in range whose customer the
	// ledger does not hold (on no statement or balance anyone can read);
	// ForeignKeyEvents those of a known customer whose key is not one of
	// that customer's (or no key the ledger holds). A gateway publishes
	// neither: such an event came from another publisher on the usage
	// subject (or a customer or key row was deleted by hand). Like
	// unpriced events they are facts to act on, reported, not part of
	// Clean: the ledger's sums agree with themselves whoever the events'
	// owners are.
	UnknownCustomerEvents int64 `json:"unknown_customer_events"`
	ForeignKeyEvents      int64 `json:"foreign_key_events"`
	// LateEvents and LateEntries count the events and entries in range
	// recorded more than usage.LateAfter (an hour) after the end of the
	// UTC month they are dated in: each moved a month already over (a
	// late delivery, a re-rating, a payment dated back). LastRecordedAt
	// is when the last event or entry in range was recorded (nil when
	// there is none): a statement or export of the range made before it
	// has changed since. Facts, not part of Clean.
	LateEvents     int64      `json:"late_events"`
	LateEntries    int64      `json:"late_entries"`
	LastRecordedAt *time.Time `json:"last_recorded_at"`
}

// MaxListed caps the rollup mismatches, and the unpriced models, a
// Reconciliation lists.
const MaxListed = 1000

// RollupMismatch is one usage_hourly row (customer, hour, key, model,
// currency) whose figures differ from those recomputed from the events
// (with their rerate entries). Fields names the figures that differ.
type RollupMismatch struct {
	CustomerID string        `json:"customer_id"`
	Hour       time.Time     `json:"hour"`
	KeyID      string        `json:"key_id"`
	Model      string        `json:"model"`
	Currency   string        `json:"currency"`
	Fields     []string      `json:"fields"`
	Events     RollupFigures `json:"events"`
	Rollup     RollupFigures `json:"rollup"`
}

// RollupFigures are a rollup row's counts, its list cost (before
// discounts) and its charge (after discounts), both after re-rating and
// decimal strings in currency units; zero when absent.
type RollupFigures struct {
	Requests          int64  `json:"requests"`
	UnpricedRequests  int64  `json:"unpriced_requests"`
	PromptTokens      int64  `json:"prompt_tokens"`
	CachedTokens      int64  `json:"cached_tokens"`
	CacheWriteTokens  int64  `json:"cache_write_tokens"`
	CompletionTokens  int64  `json:"completion_tokens"`
	ReasoningTokens   int64  `json:"reasoning_tokens"`
	WebSearchRequests int64  `json:"web_search_requests"`
	ListCost          string `json:"list_cost"`
	Charge            string `json:"charge"`
}

// BalanceMismatch is a customer's balance row in a currency that differs
// from the ledger: Expected is recomputed from entries (credits: non-rerate
// entries in the customer's favour; charges: events' charges, rerate
// entries and entries against the customer), Stored is customer_balances.
type BalanceMismatch struct {
	CustomerID string         `json:"customer_id"`
	Currency   string         `json:"currency"`
	Expected   BalanceFigures `json:"expected"`
	Stored     BalanceFigures `json:"stored"`
}

// BalanceFigures are credits and charges, decimal strings in currency units.
type BalanceFigures struct {
	Credits string `json:"credits"`
	Charges string `json:"charges"`
}

// UnpricedModel counts a model's unpriced events.
type UnpricedModel struct {
	Model  string `json:"model"`
	Events int64  `json:"events"`
}

// Reconcile checks the ledger over [from, to), widened to whole hours, in
// one repeatable-read snapshot: the hourly rollups against the events and
// rerate entries (every rollup row, per customer, hour, key, model and
// currency: requests, each token class, the list cost and the charge); the events against
// their dedupe keys; the rerate entries against their events; the balances against the entries and events (all
// time); and it counts unpriced events, rejected duplicates and the rows
// recorded after their month was over (LateEvents, LateEntries). It returns
// EInvalid when from is not before to. It reads every event in range:
// run it off-peak, or against a replica, on large ranges.
func (s *Store) Reconcile(ctx context.Context, from, to time.Time) (Reconciliation, error) {
	// A zero from is a bound: the first instant of the year 0001, the
	// earliest the API takes (from=0001-01-01), not a missing one.
	if to.IsZero() || !from.Before(to) {
		return Reconciliation{}, errorf(EInvalid, "from and to are required, with from before to")
	}
	rec := Reconciliation{From: from.UTC().Truncate(time.Hour), To: to.UTC().Add(time.Hour - 1).Truncate(time.Hour),
		RollupMismatches: []RollupMismatch{}, BalanceMismatches: []BalanceMismatch{}, Unpriced: []UnpricedModel{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for _, step := range []func(context.Context, pgx.Tx) error{rec.checkRollups, rec.checkIDs, rec.checkRerateEntries,
			rec.checkBalances, rec.countUnpriced, rec.checkOwners, rec.checkRecorded} {
			if err := step(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Reconciliation{}, dbError(err, "reconciliation")
	}
	rec.Clean = rec.RollupMismatchCount == 0 && len(rec.BalanceMismatches) == 0 && rec.EventsWithoutID == 0 &&
		rec.IDsWithoutEvent == 0 && rec.DuplicateIDs == 0 && rec.Events+rec.Attempts == rec.EventIDs &&
		rec.RerateEntriesWithoutEvent == 0
	return rec, nil
}

// lateSQL is true for a row dated at %[1]s and recorded at %[2]s more than
// usage.LateAfter after the end of its UTC month.
const lateSQL = `%[2]s > (date_trunc('month', %[1]s AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') + interval '1 month' + $3 * interval '1 second'`

// checkRecorded counts the entries in range recorded late (usage.Late),
// and moves LastRecordedAt (the events', from checkIDs) to the last of
// them when it is later.
func (rec *Reconciliation) checkRecorded(ctx context.Context, tx pgx.Tx) error {
	var last *time.Time
	err := tx.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE `+fmt.Sprintf(lateSQL, "effective_at", "created_at")+`), max(created_at)
		FROM ledger_entries WHERE effective_at >= $1 AND effective_at < $2`,
		rec.From, rec.To, int64(usage.LateAfter/time.Second)).Scan(&rec.LateEntries, &last)
	if err != nil {
		return err
	}
	if last != nil && (rec.LastRecordedAt == nil || last.After(*rec.LastRecordedAt)) {
		rec.LastRecordedAt = last
	}
	if rec.LastRecordedAt != nil {
		u := rec.LastRecordedAt.UTC()
		rec.LastRecordedAt = &u
	}
	return nil
}

// checkOwners counts the events in range of a customer the ledger does
// not hold, and of a key that is not their customer's, by (customer, key)
// pair: a few rows per key, not one per event.
func (rec *Reconciliation) checkOwners(ctx context.Context, tx pgx.Tx) error {
	return tx.QueryRow(ctx, `
		WITH pairs AS (
		  SELECT customer_id, key_id, count(*) AS n FROM usage_events
		  WHERE occurred_at >= $1 AND occurred_at < $2 GROUP BY 1, 2
		)
		SELECT coalesce(sum(p.n) FILTER (WHERE c.id IS NULL), 0)::bigint,
		  coalesce(sum(p.n) FILTER (WHERE c.id IS NOT NULL AND k.customer_id IS DISTINCT FROM p.customer_id), 0)::bigint
		FROM pairs p LEFT JOIN customers c ON c.id = p.customer_id LEFT JOIN api_keys k ON k.id = p.key_id`,
		rec.From, rec.To).Scan(&rec.UnknownCustomerEvents, &rec.ForeignKeyEvents)
}

// figures lists a rollup's figures in SQL, for side p ("ev" or "ro"): to
// compare, or with text, to scan (the amounts as exact text).
func figures(p string, text bool) string {
	f := ""
	for _, c := range []string{"requests", "unpriced_requests", "prompt_tokens", "cached_tokens", "cache_write_tokens",
		"completion_tokens", "reasoning_tokens", "web_search_requests"} {
		f += "coalesce(" + p + "." + c + ", 0)::bigint, "
	}
	cast := ""
	if text {
		cast = "::text"
	}
	return f + "coalesce(" + p + ".cost_e12, 0)" + cast + ", coalesce(" + p + ".charge_e12, 0)" + cast
}

// checkRollups recomputes each rollup row from the events in range: an
// event first priced by re-rating counts in its rerate entry's currency,
// and its rerate entries move the charge (amount = −Δcharge) and the list
// cost (cost_e12 = Δlist cost: an event's cost_e12 is as first rated).
func (rec *Reconciliation) checkRollups(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `
		WITH rr AS (
		  SELECT event_id, max(currency) AS currency, sum(amount_e12) AS amount, sum(cost_e12) AS cost FROM ledger_entries
		  WHERE kind = 'rerate' AND effective_at >= $1 AND effective_at < $2 GROUP BY event_id
		), ev AS (
		  SELECT e.customer_id, date_trunc('hour', e.occurred_at) AS hour, e.key_id, e.model,
		    coalesce(rr.currency, e.currency) AS currency, count(*) AS requests,
		    count(*) FILTER (WHERE e.unpriced AND rr.currency IS NULL) AS unpriced_requests,
		    sum(e.prompt_tokens) AS prompt_tokens, sum(e.cached_tokens) AS cached_tokens,
		    sum(e.cache_write_tokens) AS cache_write_tokens, sum(e.completion_tokens) AS completion_tokens,
		    sum(e.reasoning_tokens) AS reasoning_tokens, sum(e.web_search_requests) AS web_search_requests,
		    sum(e.cost_e12) + coalesce(sum(rr.cost), 0) AS cost_e12,
		    sum(e.cost_e12::numeric * (10000 - e.discount_bp)) * 0.0001 - coalesce(sum(rr.amount), 0) AS charge_e12
		  FROM usage_events e LEFT JOIN rr ON rr.event_id = e.id
		  WHERE e.occurred_at >= $1 AND e.occurred_at < $2 GROUP BY 1, 2, 3, 4, 5
		), ro AS (
		  SELECT * FROM usage_hourly WHERE hour >= $1 AND hour < $2
		)
		SELECT customer_id::text, hour, key_id::text, model, currency, `+figures("ev", true)+`, `+figures("ro", true)+`
		FROM ev FULL JOIN ro USING (customer_id, hour, key_id, model, currency)
		WHERE (`+figures("ev", false)+`) <> (`+figures("ro", false)+`)
		ORDER BY customer_id, hour, key_id, model, currency`, rec.From, rec.To)
	if err != nil {
		return err
	}
	var m RollupMismatch
	var ev, ro RollupFigures
	var evCost, evCharge, roCost, roCharge string
	dest := append(append([]any{&m.CustomerID, &m.Hour, &m.KeyID, &m.Model, &m.Currency},
		ev.scanDest(&evCost, &evCharge)...), ro.scanDest(&roCost, &roCharge)...)
	_, err = pgx.ForEachRow(rows, dest, func() error {
		rec.RollupMismatchCount++
		if len(rec.RollupMismatches) >= MaxListed {
			return nil
		}
		var amounts [4]decimal.Decimal
		for i, t := range []string{evCost, evCharge, roCost, roCharge} {
			d, err := e12(t)
			if err != nil {
				return err
			}
			amounts[i] = d
		}
		ev.ListCost, ev.Charge, ro.ListCost, ro.Charge = amounts[0].String(), amounts[1].String(), amounts[2].String(), amounts[3].String()
		mm := m
		mm.Hour, mm.Events, mm.Rollup = m.Hour.UTC(), ev, ro
		mm.Fields = ev.diff(ro, amounts[0].Equal(amounts[2]), amounts[1].Equal(amounts[3]))
		rec.RollupMismatches = append(rec.RollupMismatches, mm)
		return nil
	})
	return err
}

func (f *RollupFigures) scanDest(cost, charge *string) []any {
	return []any{&f.Requests, &f.UnpricedRequests, &f.PromptTokens, &f.CachedTokens, &f.CacheWriteTokens,
		&f.CompletionTokens, &f.ReasoningTokens, &f.WebSearchRequests, cost, charge}
}

// diff names the figures of f and g that differ.
func (f RollupFigures) diff(g RollupFigures, sameListCost, sameCharge bool) []string {
	var out []string
	for _, c := range []struct {
		name string
		a, b int64
	}{{"requests", f.Requests, g.Requests}, {"unpriced_requests", f.UnpricedRequests, g.UnpricedRequests},
		{"prompt_tokens", f.PromptTokens, g.PromptTokens}, {"cached_tokens", f.CachedTokens, g.CachedTokens},
		{"cache_write_tokens", f.CacheWriteTokens, g.CacheWriteTokens}, {"completion_tokens", f.CompletionTokens, g.CompletionTokens},
		{"reasoning_tokens", f.ReasoningTokens, g.ReasoningTokens}, {"web_search_requests", f.WebSearchRequests, g.WebSearchRequests},
	} {
		if c.a != c.b {
			out = append(out, c.name)
		}
	}
	if !sameListCost {
		out = append(out, "list_cost")
	}
	if !sameCharge {
		out = append(out, "charge")
	}
	return out
}

// checkIDs matches the events in range with their dedupe keys. An id
// stored as two events matches event_ids once at most, so duplicates are
// looked for among the events without a key only. The one read of the
// events it counts also counts those recorded late and the last recorded.
func (rec *Reconciliation) checkIDs(ctx context.Context, tx pgx.Tx) error {
	err := tx.QueryRow(ctx, `
		WITH evc AS (
		  SELECT count(*) AS n, count(*) FILTER (WHERE `+fmt.Sprintf(lateSQL, "occurred_at", "recorded_at")+`) AS late,
		    max(recorded_at) AS last
		  FROM usage_events WHERE occurred_at >= $1 AND occurred_at < $2
		), orphans AS (
		  SELECT e.id, e.occurred_at FROM usage_events e
		  WHERE e.occurred_at >= $1 AND e.occurred_at < $2
		    AND NOT EXISTS (SELECT 1 FROM event_ids i WHERE i.id = e.id AND i.occurred_at = e.occurred_at)
		)
		SELECT (SELECT n FROM evc), (SELECT late FROM evc), (SELECT last FROM evc),
		  (SELECT count(*) FROM event_ids WHERE occurred_at >= $1 AND occurred_at < $2),
		  (SELECT count(*) FROM orphans),
		  (SELECT count(*) FROM event_ids i WHERE i.occurred_at >= $1 AND i.occurred_at < $2
		    AND NOT EXISTS (SELECT 1 FROM usage_events e WHERE e.id = i.id AND e.occurred_at = i.occurred_at
		      AND e.occurred_at >= $1 AND e.occurred_at < $2)
		    AND NOT EXISTS (SELECT 1 FROM usage_attempts a WHERE a.id = i.id AND a.occurred_at = i.occurred_at)),
		  (SELECT count(DISTINCT o.id) FROM orphans o
		    WHERE EXISTS (SELECT 1 FROM usage_events d WHERE d.id = o.id AND d.occurred_at <> o.occurred_at)),
		  coalesce((SELECT value FROM ingest_counters WHERE name = 'duplicates'), 0),
		  (SELECT count(*) FROM usage_attempts WHERE occurred_at >= $1 AND occurred_at < $2)`, rec.From, rec.To,
		int64(usage.LateAfter/time.Second),
	).Scan(&rec.Events, &rec.LateEvents, &rec.LastRecordedAt, &rec.EventIDs, &rec.EventsWithoutID, &rec.IDsWithoutEvent, &rec.DuplicateIDs, &rec.DuplicatesRejected,
		&rec.Attempts)
	return err
}

// checkRerateEntries counts the rerate entries in range without their
// event: none stored with the entry's event id, customer and time (an
// entry is dated at its event's time, to the microsecond). checkRollups
// joins rerate entries to the events of the range by id alone, so an entry
// naming no event, or dated away from its event (in another range), was
// in no rollup figure it checks.
func (rec *Reconciliation) checkRerateEntries(ctx context.Context, tx pgx.Tx) error {
	return tx.QueryRow(ctx, `
		SELECT count(*) FROM ledger_entries l
		WHERE l.kind = 'rerate' AND l.effective_at >= $1 AND l.effective_at < $2
		  AND NOT EXISTS (SELECT 1 FROM usage_events e
		    WHERE e.id = l.event_id AND e.occurred_at = l.effective_at AND e.customer_id = l.customer_id)`,
		rec.From, rec.To).Scan(&rec.RerateEntriesWithoutEvent)
}

// checkBalances recomputes every balance row as insertEntry, stagedStatement
// and rerateOne move it: its credits from the ledger entries, its charges
// from the rollups (which hold the events' charges and their re-ratings,
// as rerateOne moves both) and the entries that charge. Balances are
// totals over all time, so this reads every rollup row; it read every
// event instead, and a reconciliation of any range, the console's last
// 24 hours included, grew with the whole ledger (27 s with 13 million
// events, a review). The rollups are checked against the events range by
// range (checkRollups): the chain events, rollups, balances holds for
// every range reconciled.
func (rec *Reconciliation) checkBalances(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `
		WITH expected AS (
		  SELECT customer_id, currency, sum(credits) AS credits, sum(charges) AS charges FROM (
		    SELECT customer_id, currency, 0 AS credits, sum(charge_e12) AS charges
		    FROM usage_hourly WHERE currency <> '' GROUP BY 1, 2
		    UNION ALL
		    SELECT customer_id, currency, coalesce(sum(amount_e12) FILTER (WHERE kind <> 'rerate' AND amount_e12 > 0), 0),
		      -coalesce(sum(amount_e12) FILTER (WHERE kind <> 'rerate' AND amount_e12 < 0), 0)
		    FROM ledger_entries GROUP BY 1, 2
		  ) x GROUP BY 1, 2
		)
		SELECT customer_id::text, currency, coalesce(x.credits, 0)::text, coalesce(x.charges, 0)::text,
		  coalesce(b.credits_e12, 0)::text, coalesce(b.charges_e12, 0)::text
		FROM expected x FULL JOIN customer_balances b USING (customer_id, currency)
		WHERE coalesce(x.credits, 0) <> coalesce(b.credits_e12, 0) OR coalesce(x.charges, 0) <> coalesce(b.charges_e12, 0)
		ORDER BY customer_id, currency`)
	if err != nil {
		return err
	}
	var m BalanceMismatch
	var f [4]string
	_, err = pgx.ForEachRow(rows, []any{&m.CustomerID, &m.Currency, &f[0], &f[1], &f[2], &f[3]}, func() error {
		for i, dst := range []*string{&m.Expected.Credits, &m.Expected.Charges, &m.Stored.Credits, &m.Stored.Charges} {
			d, err := e12(f[i])
			if err != nil {
				return err
			}
			*dst = d.String()
		}
		rec.BalanceMismatches = append(rec.BalanceMismatches, m)
		return nil
	})
	return err
}

func (rec *Reconciliation) countUnpriced(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `
		SELECT model, events, count(*) OVER (), sum(events) OVER ()::bigint FROM (
		  SELECT e.model, count(*) AS events FROM usage_events e
		  WHERE e.occurred_at >= $1 AND e.occurred_at < $2 AND e.unpriced
		    AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.event_id = e.id AND r.kind = 'rerate')
		  GROUP BY e.model) m
		ORDER BY events DESC, model LIMIT $3`, rec.From, rec.To, MaxListed)
	if err != nil {
		return err
	}
	var u UnpricedModel
	_, err = pgx.ForEachRow(rows, []any{&u.Model, &u.Events, &rec.UnpricedModels, &rec.UnpricedEvents}, func() error {
		rec.Unpriced = append(rec.Unpriced, u)
		return nil
	})
	return err
}
