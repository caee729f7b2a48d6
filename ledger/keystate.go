package ledger

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Why a key or a customer may not spend, as the gateways tell the caller.
const (
	blockedCredit  = "the account's prepaid balance and credit limit are exhausted; add credit to continue"
	blockedDaily   = "this API key has reached its daily spend limit"
	blockedMonthly = "this API key has reached its monthly spend limit"
	// A limit of 0: the key may spend nothing until the limit is raised.
	blockedDailyZero   = "this API key's daily spend limit is 0: it may spend nothing until the limit is raised"
	blockedMonthlyZero = "this API key's monthly spend limit is 0: it may spend nothing until the limit is raised"
)

// maxMicrosSQL is 2^62, the most micro-units an amount the ledger takes
// may be (ParseSignedMicros), as SQL: the states' sums of numeric
// amounts (a balance plus a credit limit, a key's spend) are clamped to
// it before they are cast to bigint. Unclamped, a sum past int64 failed
// the state's query, and with it every key change the syncer published
// after it (a revocation that never reached the gateways).
const maxMicrosSQL = "4611686018427387904"

// keyStateQuery reads keys' states as of one clock reading ($1, from
// readClock): their limits,
// and whether their spend of the current UTC day or month (key_spend; 0
// when the key has spent nothing in it) has reached their daily or
// monthly limit, and whether that limit is 0 (a key frozen by its limit,
// blocked for as long as the limit stays 0); then its limits and that
// spend in micro-units (rounded up, at most 2^62: see maxMicrosSQL), for the gateways' spend holds. The reading, in Unix
// nanoseconds, is the states' version. Callers add a WHERE clause on k,
// its parameters from $2.
const keyStateQuery = `
SELECT k.id::text, k.customer_id::text, k.secret_hash, k.revoked_at IS NOT NULL, k.expires_at,
  coalesce(k.rpm_limit, 0), coalesce(k.tpm_limit, 0), coalesce(k.max_concurrent, 0), k.allowed_models,
  coalesce(CASE WHEN sp.day_start = d.day THEN sp.day_e12 ELSE 0 END >= k.daily_limit_micros::numeric * 1000000, false),
  coalesce(CASE WHEN sp.month_start = d.month THEN sp.month_e12 ELSE 0 END >= k.monthly_limit_micros::numeric * 1000000, false),
  coalesce(k.daily_limit_micros = 0, false), coalesce(k.monthly_limit_micros = 0, false),
  d.day, d.month, d.version,
  k.daily_limit_micros IS NOT NULL OR k.monthly_limit_micros IS NOT NULL, c.currency,
  k.daily_limit_micros, k.monthly_limit_micros,
  least(coalesce(ceil(CASE WHEN sp.day_start = d.day THEN sp.day_e12 ELSE 0 END / 1000000), 0), ` + maxMicrosSQL + `)::bigint,
  least(coalesce(ceil(CASE WHEN sp.month_start = d.month THEN sp.month_e12 ELSE 0 END / 1000000), 0), ` + maxMicrosSQL + `)::bigint
FROM (SELECT date_trunc('day', t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day,
        date_trunc('month', t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month,
        (extract(epoch FROM t) * 1000000000)::bigint AS version
      FROM (SELECT $1::timestamptz AS t) n) d
CROSS JOIN api_keys k
JOIN customers c ON c.id = k.customer_id
LEFT JOIN key_spend sp ON sp.key_id = k.id
`

// customerStateQuery reads customers' budget states, as of one clock
// reading ($1, from readClock, their version): blocked when the
// customer has a credit limit and balance ≤ −credit_limit, and then what
// it may still spend (balance + credit_limit, in micro-units rounded
// down, within ±2^62; NULL without a credit limit). Callers add a
// WHERE clause on c, its parameters from $2.
const customerStateQuery = `
SELECT c.id::text, c.currency,
  c.credit_limit_micros IS NOT NULL
    AND coalesce(b.credits_e12 - b.charges_e12, 0) <= -c.credit_limit_micros::numeric * 1000000,
  (extract(epoch FROM $1::timestamptz) * 1000000000)::bigint,
  c.credit_limit_micros IS NOT NULL,
  CASE WHEN c.credit_limit_micros IS NOT NULL THEN -- least and greatest skip a NULL
    least(greatest(floor((coalesce(b.credits_e12 - b.charges_e12, 0) + c.credit_limit_micros::numeric * 1000000) / 1000000),
      -` + maxMicrosSQL + `), ` + maxMicrosSQL + `)::bigint END
FROM customers c
LEFT JOIN customer_balances b ON b.customer_id = c.id AND b.currency = c.currency
`

// readClock reads the database's clock for the version of the states a
// later statement of q reads. It is read first, in a statement of its
// own, so that in READ COMMITTED it comes before that statement's
// snapshot: a state read from a snapshot that missed a change (a key's
// revocation) then has a version below that of any state read after the
// change, and cannot replace it in the buckets or a gateway's cache.
// Read in the same statement, clock_timestamp() came after the snapshot:
// a full sync that raced a revocation published the key active again
// with the newer version (CI, 2026-12-04).
func readClock(ctx context.Context, q pgx.Tx) (time.Time, error) {
	var t time.Time
	err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}

// queryKeyStates runs keyStateQuery with where and args ($2 on), as of a
// clock reading taken first.
func queryKeyStates(ctx context.Context, q pgx.Tx, where string, args ...any) ([]usage.KeyChange, error) {
	clock, err := readClock(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("key states: %w", err)
	}
	rows, err := q.Query(ctx, keyStateQuery+where, append([]any{clock}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("key states: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (usage.KeyChange, error) {
		var c usage.KeyChange
		s := &c.State
		var hash []byte
		var dayOut, monthOut, dayZero, monthZero bool
		var day, month time.Time
		err := r.Scan(&s.KeyID, &s.CustomerID, &hash, &s.Revoked, &s.ExpiresAt, &s.RPMLimit, &s.TPMLimit,
			&s.MaxConcurrent, &s.AllowedModels, &dayOut, &monthOut, &dayZero, &monthZero, &day, &month, &s.Version,
			&s.SpendLimited, &s.Currency, &s.DailyLimitMicros, &s.MonthlyLimitMicros, &s.DaySpentMicros, &s.MonthSpentMicros)
		c.Hash = hex.EncodeToString(hash)
		if len(s.AllowedModels) == 0 {
			s.AllowedModels = nil
		}
		// A limit of 0 blocks with no end: the next period's spend starts
		// at 0, which has reached it already, and no batch crosses it.
		switch {
		case monthZero:
			s.Blocked = blockedMonthlyZero
		case dayZero:
			s.Blocked = blockedDailyZero
		case monthOut:
			until := month.UTC().AddDate(0, 1, 0)
			s.Blocked, s.BlockedUntil = blockedMonthly, &until
		case dayOut:
			until := day.UTC().AddDate(0, 0, 1)
			s.Blocked, s.BlockedUntil = blockedDaily, &until
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("key states: %w", err)
	}
	return out, nil
}

// queryCustomerStates runs customerStateQuery with where and args ($2
// on), as of a clock reading taken first.
func queryCustomerStates(ctx context.Context, q pgx.Tx, where string, args ...any) ([]usage.CustomerChange, error) {
	clock, err := readClock(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("customer states: %w", err)
	}
	rows, err := q.Query(ctx, customerStateQuery+where, append([]any{clock}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("customer states: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (usage.CustomerChange, error) {
		var c usage.CustomerChange
		var blocked bool
		err := r.Scan(&c.CustomerID, &c.State.Currency, &blocked, &c.State.Version, &c.State.CreditLimited, &c.State.CreditLeftMicros)
		if blocked {
			c.State.Blocked = blockedCredit
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("customer states: %w", err)
	}
	if err != nil || len(out) == 0 {
		return out, err
	}
	ids := make([]string, len(out))
	at := make(map[string]int, len(out))
	for i := range out {
		ids[i], at[out[i].CustomerID] = out[i].CustomerID, i
	}
	ovs, err := queryOverrides(ctx, q, `WHERE customer_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("customer states: overrides: %w", err)
	}
	for _, o := range ovs {
		c := &out[at[o.CustomerID]].State
		c.Overrides = append(c.Overrides, o.terms())
	}
	for i := range out { // only what can still apply: the state is one NATS message
		out[i].State.Overrides = liveOverrides(out[i].State.Overrides, clock)
	}
	return out, nil
}

// readCommitted is the mode of the transactions that read states: each
// statement's snapshot comes after the clock reading before it (readClock),
// whatever default_transaction_isolation the database has.
var readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly}

// queryModelPrices reads the price versions of models, as of one clock
// reading (their version); a model without prices has none.
func queryModelPrices(ctx context.Context, q pgx.Tx, models []string) ([]usage.ModelPrices, error) {
	clock, err := readClock(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("model prices: %w", err)
	}
	version := clock.UnixNano() // microseconds, as Postgres keeps time: the states' versions in SQL read the same
	ps, err := queryPrices(ctx, q, `WHERE model = ANY($1)`, models)
	if err != nil {
		return nil, fmt.Errorf("model prices: %w", err)
	}
	out := make([]usage.ModelPrices, len(models))
	at := make(map[string]int, len(models))
	for i, m := range models {
		out[i], at[m] = usage.ModelPrices{Model: m, Versions: []usage.Price{}, Version: version}, i
	}
	for _, p := range ps {
		mp := &out[at[p.Model]]
		mp.Versions = append(mp.Versions, p)
	}
	for i := range out { // only what can still apply: the state is one NATS message
		out[i].Versions = livePrices(out[i].Versions, clock)
	}
	return out, nil
}

// KeyState returns the state of the active key whose secret hashes to
// hash (hex SHA-256, usage.KeyHash) and its customer's budget state;
// ok=false when there is no such key, or it is revoked. It is how a
// gateway checks a key it has not been sent yet (meter/keys.Loader).
func (s *Store) KeyState(ctx context.Context, hash string) (k usage.KeyState, c usage.CustomerState, ok bool, err error) {
	raw, err := hex.DecodeString(hash)
	if err != nil || len(raw) != 32 {
		return k, c, false, nil
	}
	err = pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
		keys, err := queryKeyStates(ctx, tx, `WHERE k.secret_hash = $2 AND k.revoked_at IS NULL`, raw)
		if err != nil || len(keys) == 0 {
			return err
		}
		customers, err := queryCustomerStates(ctx, tx, `WHERE c.id = $2`, keys[0].State.CustomerID)
		if err != nil || len(customers) == 0 {
			return err
		}
		k, c, ok = keys[0].State, customers[0].State, true
		return nil
	})
	return k, c, ok, err
}

// PublishKeyChanges takes up to max changes from the key outbox (those
// no other caller holds), reads the current state of each key and
// customer changed, and calls publish with them; the changes leave the
// outbox when publish returns nil, and stay for the next call otherwise.
// It returns how many changes it took, and publish's error or the
// database's.
func (s *Store) PublishKeyChanges(ctx context.Context, max int, publish func(context.Context, usage.Changes) error) (int, error) {
	var n int
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// Losing this transaction's commit in a crash only publishes its
		// changes again (publication is idempotent): it need not wait for
		// the WAL's flush, which the admin API's answer would wait for.
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			DELETE FROM key_outbox WHERE seq IN (
			  SELECT seq FROM key_outbox ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING kind, ref::text`, max)
		if err != nil {
			return err
		}
		refs := map[string][]string{}
		seen := map[[2]string]bool{}
		var kind, ref string
		if _, err := pgx.ForEachRow(rows, []any{&kind, &ref}, func() error {
			n++
			if !seen[[2]string{kind, ref}] {
				seen[[2]string{kind, ref}] = true
				refs[kind] = append(refs[kind], ref)
			}
			return nil
		}); err != nil || n == 0 {
			return err
		}
		var c usage.Changes
		if len(refs["key"]) > 0 {
			if c.Keys, err = queryKeyStates(ctx, tx, `WHERE k.id = ANY($2::uuid[])`, refs["key"]); err != nil {
				return err
			}
		}
		if len(refs["customer"]) > 0 {
			if c.Customers, err = queryCustomerStates(ctx, tx, `WHERE c.id = ANY($2::uuid[])`, refs["customer"]); err != nil {
				return err
			}
		}
		if len(refs["price"]) > 0 {
			if c.Prices, err = queryModelPrices(ctx, tx, refs["price"]); err != nil {
				return err
			}
		}
		return publish(ctx, c)
	})
	if err != nil {
		return 0, fmt.Errorf("publish key changes: %w", err)
	}
	return n, nil
}

// KeyChangePending reports whether the change seq (Key.Change), or one
// before it, is still in the key outbox, not yet published.
func (s *Store) KeyChangePending(ctx context.Context, seq int64) (bool, error) {
	var pending bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM key_outbox WHERE seq <= $1)`, seq).Scan(&pending)
	return pending, err
}

// LastKeyChange returns the sequence of the last change in the key outbox
// (0 when it is empty): waiting for it waits for every change so far.
func (s *Store) LastKeyChange(ctx context.Context) (int64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM key_outbox`).Scan(&seq)
	return seq, err
}

// syncChunk is how many states one query of AllKeyStates reads.
const syncChunk = 10_000

// AllKeyStates reads the state of every key (revoked ones included, so
// that no stale state of theirs survives a full sync), every model's
// prices, and every customer, in chunks of syncChunk, each read as of its own clock reading,
// and calls publish with each chunk. It stops at the first error.
func (s *Store) AllKeyStates(ctx context.Context, publish func(context.Context, usage.Changes) error) error {
	for _, part := range []struct {
		table string
		read  func(tx pgx.Tx, after string) (usage.Changes, string, error)
	}{
		{"keys", func(tx pgx.Tx, after string) (usage.Changes, string, error) {
			keys, err := queryKeyStates(ctx, tx, `WHERE k.id > $2::uuid ORDER BY k.id LIMIT $3`, after, syncChunk)
			if err != nil || len(keys) == 0 {
				return usage.Changes{}, "", err
			}
			return usage.Changes{Keys: keys}, keys[len(keys)-1].State.KeyID, nil
		}},
		{"prices", func(tx pgx.Tx, after string) (usage.Changes, string, error) {
			if after != "" {
				return usage.Changes{}, "", nil
			}
			rows, err := tx.Query(ctx, `SELECT DISTINCT model FROM prices ORDER BY model`)
			if err != nil {
				return usage.Changes{}, "", err
			}
			models, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(models) == 0 {
				return usage.Changes{}, "", err
			}
			ps, err := queryModelPrices(ctx, tx, models)
			return usage.Changes{Prices: ps}, "done", err
		}},
		{"customers", func(tx pgx.Tx, after string) (usage.Changes, string, error) {
			cs, err := queryCustomerStates(ctx, tx, `WHERE c.id > $2::uuid ORDER BY c.id LIMIT $3`, after, syncChunk)
			if err != nil || len(cs) == 0 {
				return usage.Changes{}, "", err
			}
			return usage.Changes{Customers: cs}, cs[len(cs)-1].CustomerID, nil
		}},
	} {
		after := "00000000-0000-0000-0000-000000000000"
		if part.table == "prices" {
			after = "" // one chunk: every model
		}
		for {
			var c usage.Changes
			err := pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
				var err error
				c, after, err = part.read(tx, after)
				return err
			})
			if err != nil {
				return fmt.Errorf("read all %s: %w", part.table, err)
			}
			if c.Len() == 0 {
				break
			}
			if err := publish(ctx, c); err != nil {
				return err
			}
			if c.Len() < syncChunk || part.table == "prices" {
				break
			}
		}
	}
	return nil
}

// KeySyncEpoch returns the identity of this database's key states (a
// UUID made by the migration): a bucket marked with another one, or with
// none, needs a full sync.
func (s *Store) KeySyncEpoch(ctx context.Context) (string, error) {
	var epoch string
	err := s.pool.QueryRow(ctx, `SELECT epoch::text FROM key_sync_epoch LIMIT 1`).Scan(&epoch)
	if err != nil {
		return "", fmt.Errorf("key sync epoch: %w", err)
	}
	return epoch, nil
}

// ListenKeyChanges holds a connection listening for commits to the key
// outbox and calls wake after each (and once at the start, for changes
// made before it listened), until ctx ends or the connection fails; it
// returns the error then (ctx's when ctx ended).
func (s *Store) ListenKeyChanges(ctx context.Context, wake func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen for key changes: %w", err)
	}
	defer func() {
		// A connection left listening must not go back to the pool.
		conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, `LISTEN tollgate_key_outbox`); err != nil {
		return fmt.Errorf("listen for key changes: %w", err)
	}
	wake()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return fmt.Errorf("listen for key changes: %w", err)
		}
		wake()
	}
}

// spendPeriods are the current UTC day and month, as SQL.
const spendPeriods = `(SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day,
    date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month) d`

// The key spend lock orders the writers of key_spend, so that a key's
// spend (key_spend) is always what its hourly rollups say for the current
// UTC day and month, however they interleave. Two kinds of writers:
//
//   - Adders move a key's spend by what they add to its rollups, and only
//     for a key with a daily or monthly limit as their statement's
//     snapshot sees api_keys: a batch of events (batchEffects), and, by
//     recomputing, a re-rating (spendMoved). Each takes the lock shared
//     (spendLockShared) in a statement before the one that writes (READ
//     COMMITTED takes a statement's snapshot when it starts, and it must
//     come after the lock), and before it locks any row: a batch with the
//     staging table's CREATE, in the same round trip (writeStagedBatch),
//     a re-rating batch first in the pipeline of its writes (Rerate).
//     Adders do not wait for each other.
//   - A limit change (UpdateKey setting daily_limit or monthly_limit) sets
//     which keys have their spend moved, and recomputes the key's spend
//     from its rollups. It takes the lock exclusively (spendLockExclusiveBounded)
//     before anything else, so that no adder is between its snapshot and
//     its commit meanwhile: the recompute, a statement of its own after
//     the lock, sees every charge committed before it, and every adder
//     after it sees the new limit. Without the lock, a batch whose
//     snapshot predated the change's commit moved no spend for a key that
//     had no limit, while the change's recompute, its snapshot from before
//     the batch's commit, missed the batch's charges; and for a key that
//     had a limit, the recompute wrote over the increment of a batch that
//     committed after its snapshot.
//
// A re-rating's recompute races the batches (both hold the lock shared):
// it first locks the keys' key_spend rows (lockKeySpend, making a missing
// one), which waits for every batch that moved them and has not
// committed, and then recomputes in a statement of its own, whose
// snapshot has those batches' charges; a batch after it adds to what it
// wrote. Taking the lock exclusively instead would stop the meter for the
// whole of every re-rating batch.
//
// Deadlocks: the lock is taken before any row lock by every side, so no
// one holds a row another waits for while it waits for the lock. A limit
// change waiting for the lock makes later shared requests wait behind it
// (Postgres queues them): the meter's new batches wait for the batches in
// flight to commit and for the change. So that a batch held open long (a
// row lock it waits for, a re-rating's batch) cannot stop the whole meter
// behind a limit change, the change waits for the lock at most
// spendLockWait (its transaction's lock_timeout), and then fails
// (EUnavailable: try again), letting the meter's batches go on.
const (
	spendLockKey              = `hashtext('tollgate key spend')`
	spendLockShared           = `SELECT pg_advisory_xact_lock_shared(` + spendLockKey + `)`
	spendLockExclusiveBounded = `SET LOCAL lock_timeout = '` + spendLockWaitSQL + `'; SELECT pg_advisory_xact_lock(` + spendLockKey + `)`
)

// spendLockWait is the longest a limit change waits for the key spend
// lock, and so the longest it holds the meter's batches back: about a
// batch's commit a few times over (a batch of 6,000 events commits in
// about 0.1 s at 50,000 events/s).
const (
	spendLockWait    = 2 * time.Second
	spendLockWaitSQL = "2s"
)

// lockKeySpend locks the key_spend rows of the given keys that have a
// daily or monthly limit, making those missing (a zero spend, which
// recomputeKeySpend then sets), within tx. It waits for the batches that
// moved them to commit (see the key spend lock).
// lockKeySpendSQL is lockKeySpend's statement, $1 the keys' ids.
const lockKeySpendSQL = `
		INSERT INTO key_spend (key_id, day_start, day_e12, month_start, month_e12)
		SELECT k.id, d.day, 0, d.month, 0 FROM api_keys k CROSS JOIN ` + spendPeriods + `
		WHERE k.id = ANY($1::uuid[]) AND (k.daily_limit_micros IS NOT NULL OR k.monthly_limit_micros IS NOT NULL)
		ORDER BY k.id
		ON CONFLICT (key_id) DO UPDATE SET day_e12 = key_spend.day_e12`

func lockKeySpend(ctx context.Context, tx pgx.Tx, keyIDs []string) error {
	_, err := tx.Exec(ctx, lockKeySpendSQL, keyIDs)
	if err != nil {
		return fmt.Errorf("key spend: lock: %w", err)
	}
	return nil
}

// recomputeKeySpend sets the key_spend of the given keys that have a
// daily or monthly limit from their hourly rollups (after a limit is set,
// or their charges re-rated), within tx, which holds the key spend lock
// (exclusively, or shared with the keys' rows locked: lockKeySpend). A
// row already on a later day (written by a transaction that began after
// this one's midnight) is left as it is: this one's periods are over.
func recomputeKeySpend(ctx context.Context, tx pgx.Tx, keyIDs []string) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO key_spend (key_id, day_start, day_e12, month_start, month_e12)
		SELECT k.id, d.day, coalesce(sum(h.charge_e12) FILTER (WHERE h.hour >= d.day), 0),
		  d.month, coalesce(sum(h.charge_e12), 0)
		FROM api_keys k CROSS JOIN `+spendPeriods+`
		JOIN customers c ON c.id = k.customer_id
		LEFT JOIN usage_hourly h ON h.customer_id = k.customer_id AND h.key_id = k.id
		  AND h.hour >= d.month AND h.currency = c.currency
		WHERE k.id = ANY($1::uuid[]) AND (k.daily_limit_micros IS NOT NULL OR k.monthly_limit_micros IS NOT NULL)
		GROUP BY k.id, d.day, d.month ORDER BY k.id
		ON CONFLICT (key_id) DO UPDATE SET day_start = EXCLUDED.day_start, day_e12 = EXCLUDED.day_e12,
		  month_start = EXCLUDED.month_start, month_e12 = EXCLUDED.month_e12
		WHERE key_spend.day_start <= EXCLUDED.day_start`, keyIDs)
	if err != nil {
		return fmt.Errorf("key spend: %w", err)
	}
	return nil
}

// outboxAll records in tx that the states of the given keys and customers
// changed.
func outboxAll(ctx context.Context, tx pgx.Tx, keyIDs, customerIDs []string) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO key_outbox (kind, ref)
		SELECT 'key', unnest($1::uuid[]) UNION ALL SELECT 'customer', unnest($2::uuid[])`, keyIDs, customerIDs)
	if err != nil {
		return fmt.Errorf("key outbox: %w", err)
	}
	return nil
}

// spendMoved recomputes the key spend of keys whose charges changed
// outside a batch of events (re-rating), and records the changes of their
// states and their customers' in the key outbox, within tx, which holds
// the key spend lock shared, taken before its first write.
func spendMoved(ctx context.Context, tx pgx.Tx, keyIDs, customerIDs []string) error {
	if len(keyIDs) == 0 && len(customerIDs) == 0 {
		return nil
	}
	if err := lockKeySpend(ctx, tx, keyIDs); err != nil {
		return err
	}
	if err := recomputeKeySpend(ctx, tx, keyIDs); err != nil {
		return err
	}
	return outboxAll(ctx, tx, keyIDs, customerIDs)
}
