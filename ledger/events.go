package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// WriteEvents rates and stores a batch of usage events in one transaction,
// at most once per event id, whichever month's partition the event lands
// in: an event whose id is already in the ledger (a redelivery) is skipped
// and counted as a duplicate. The hourly rollups and the customers'
// balances move in the same transaction. It returns how many events were
// new. It implements meter.Store; an error means nothing of the batch was
// stored.
//
// Each event is rated at its own time (a late event is rated, and lands,
// in its own period) with the price book and the customer's overrides in
// force then (see pricing.rate).
func (s *Store) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	return s.writeEvents(ctx, events, writeStaged)
}

// batchWrite sends a rated batch within tx, and returns how many events
// were new and how many of those are unpriced.
type batchWrite func(ctx context.Context, tx pgx.Tx, events []usage.Event, p *pricing) (n, unpriced int, err error)

// writeEvents is WriteEvents with the batch sent by write.
func (s *Store) writeEvents(ctx context.Context, events []usage.Event, write batchWrite) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n, err := s.writeBatch(ctx, events, write)
	if isCode(err, "23514") {
		// "no partition of relation found for row" (or a check the data
		// fails): a partition this Store made is gone (the database was
		// restored to an earlier point, a partition dropped), and its cache
		// does not know. Not the data's fault: the batch's partitions are
		// made again and it is written once more; a second failure is the
		// data's.
		s.forgetPartitions(events)
		n, err = s.writeBatch(ctx, events, write)
	}
	if err != nil {
		return 0, fmt.Errorf("write %d events: %w", len(events), batchError(err))
	}
	return n, nil
}

// writeBatch makes the batch's partitions and writes it by write in one
// transaction.
func (s *Store) writeBatch(ctx context.Context, events []usage.Event, write batchWrite) (int, error) {
	if err := s.ensurePartitions(ctx, events); err != nil {
		return 0, err
	}
	var n, unpriced int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		p, err := loadPricing(ctx, tx, events)
		if err != nil {
			return err
		}
		n, unpriced, err = write(ctx, tx, events, p)
		if err != nil && s.obs != nil && errors.As(err, new(*usage.RefusedError)) {
			s.obs.RatingError()
		}
		return err
	})
	if err == nil && s.obs != nil && unpriced > 0 {
		s.obs.Unpriced(unpriced)
	}
	return n, err
}

// batchError classifies an error of writing a batch for the meter worker
// (see meter.Store): a data exception, an integrity violation or a
// program limit (SQLSTATE classes 22, 23 and 54) cannot be cured by
// retrying the same data, and is wrapped with usage.ErrBatchRefused so
// that the worker isolates the events at fault. Anything else (the
// connection, a serialization failure, the server shutting down, an
// undefined table before a migration) is returned as it is, to be retried.
func batchError(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && len(pg.Code) == 5 {
		switch pg.Code[:2] {
		case "22", "23", "54":
			return fmt.Errorf("%w: %w", usage.ErrBatchRefused, err)
		}
	}
	return err
}

// loadPricing reads the price versions of the batch's models and the
// overrides of its customers, holding the price book lock shared until tx
// ends.
func loadPricing(ctx context.Context, tx pgx.Tx, events []usage.Event) (*pricing, error) {
	// Sets, not slices.Contains: a batch of thousands of events has
	// hundreds of customers.
	seen := make(map[string]struct{}, 64)
	var models, customers []string
	for i := range events {
		if _, ok := seen[events[i].Model]; !ok {
			seen[events[i].Model] = struct{}{}
			models = append(models, events[i].Model)
		}
	}
	clear(seen)
	for i := range events {
		if _, ok := seen[events[i].CustomerID]; !ok {
			seen[events[i].CustomerID] = struct{}{}
			customers = append(customers, events[i].CustomerID)
		}
	}
	// Shared, before the book is read: see the price book lock.
	if _, err := tx.Exec(ctx, priceBookLockShared); err != nil {
		return nil, fmt.Errorf("price book lock: %w", err)
	}
	p := &pricing{book: map[string][]Price{}, overrides: map[string][]usage.Override{}}
	prices, err := queryPrices(ctx, tx, `WHERE model = ANY($1)`, models)
	if err != nil {
		return nil, fmt.Errorf("load prices: %w", err)
	}
	for _, pr := range prices {
		p.book[pr.Model] = append(p.book[pr.Model], pr)
	}
	ovs, err := queryOverrides(ctx, tx, `WHERE customer_id = ANY($1::uuid[])`, customers)
	if err != nil {
		return nil, fmt.Errorf("load overrides: %w", err)
	}
	for _, o := range ovs {
		p.overrides[o.CustomerID] = append(p.overrides[o.CustomerID], o.terms())
	}
	return p, nil
}

// forgetPartitions drops the months of events from the cache of
// partitions made, so that ensurePartitions makes them again.
func (s *Store) forgetPartitions(events []usage.Event) {
	for i := range events {
		s.partitions.Delete(events[i].Time.UTC().Format("2006_01"))
	}
}

// ensurePartitions creates the monthly partitions the batch needs (in
// transactions of their own, so that workers racing to create one do not
// abort their batches).
func (s *Store) ensurePartitions(ctx context.Context, events []usage.Event) error {
	for i := range events {
		t := events[i].Time.UTC()
		month := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		key := month.Format("2006_01")
		if _, ok := s.partitions.Load(key); ok {
			continue
		}
		name := "usage_events_" + month.Format("2006_01")
		err := s.makePartition(ctx, name, month, month.AddDate(0, 1, 0))
		if err != nil && !isCode(err, "42P07") { // duplicate_table: made meanwhile by a worker of an earlier version
			return fmt.Errorf("create partition %s: %w", name, err)
		}
		s.partitions.Store(key, true)
	}
	return nil
}

// makePartition makes name the partition of usage_events for [from, to),
// unless a table of that name exists or event_ids holds ids of that range
// (a month archived and dropped). It is made as a table of its own
// and then attached, in one transaction: CREATE TABLE … PARTITION OF
// would take an ACCESS EXCLUSIVE lock on usage_events, and so wait for
// every open read of it (an export, pg_dump's whole backup), every other
// read and write of the events queued behind it meanwhile. ATTACH PARTITION takes SHARE UPDATE
// EXCLUSIVE, which neither reads nor writes conflict with; it gives the
// new table the parent's indexes and row triggers (append-only); a statement
// trigger of its own refuses TRUNCATE, which the parent's do not cover (one
// made without it by an older release is given it: truncateRefused). Makers
// of one partition, in any process, take turns on an advisory lock, so
// that the second finds the table the first made.
func (s *Store) makePartition(ctx context.Context, name string, from, to time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tollgate partition ' || $1))`, name); err != nil {
			return err
		}
		// A table of that name is the partition, or one an operator
		// detached to archive its month: left as it is (a late event of
		// an archived month then finds no partition, and is set aside),
		// as CREATE TABLE IF NOT EXISTS … PARTITION OF left it.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return truncateRefused(ctx, tx, name)
		}
		// No table, but ids of the month in event_ids (which is not
		// partitioned and keeps them): the month was archived, detached
		// and dropped. Not made anew, so that its late event is refused
		// as the detached month's is, rather than start a second table
		// of the archive's name holding the late events alone.
		var archived bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM event_ids WHERE occurred_at >= $1 AND occurred_at < $2)`, from, to).Scan(&archived); err != nil || archived {
			return err
		}
		table := pgx.Identifier{name}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE TABLE `+table+` (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE usage_events ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`,
			table, from.Format(time.RFC3339), to.Format(time.RFC3339))); err != nil {
			return err
		}
		// TRUNCATE of one partition fires only its own statement
		// triggers, not the parent's: the month refuses it itself
		// (migration 14).
		_, err := tx.Exec(ctx, `CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON `+table+
			` FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()`)
		return err
	})
}

// truncateRefused gives the partition name, made by a release from before
// migration 14 (a process still running during a rolling upgrade, which
// makes a month's partition without the trigger), its TRUNCATE trigger,
// when it is attached to usage_events and lacks it. A table of that name
// not attached (a month an operator detached to archive) is left alone.
func truncateRefused(ctx context.Context, tx pgx.Tx, name string) error {
	var missing bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = $1::regclass AND inhparent = 'usage_events'::regclass)
		AND NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = 'ledger_no_truncate')`, name).Scan(&missing); err != nil || !missing {
		return err
	}
	_, err := tx.Exec(ctx, `CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON `+pgx.Identifier{name}.Sanitize()+
		` FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()`)
	return err
}

// StoredIDs returns which of ids (event ids, any case) the ledger holds:
// charged events and attempts not charged alike, as event_ids records
// them, keyed by the id as given. Ids that are not UUIDs are not stored.
// It is meter.StoredChecker's method: a worker asks it before setting
// aside an event delivered too many times.
func (s *Store) StoredIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	var parsed []uuid.UUID
	byID := map[uuid.UUID][]string{}
	for _, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			continue
		}
		if byID[u] == nil {
			parsed = append(parsed, u)
		}
		byID[u] = append(byID[u], id)
	}
	out := map[string]bool{}
	if len(parsed) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM event_ids WHERE id = ANY($1::uuid[])`, parsed)
	if err != nil {
		return nil, err
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, err
	}
	for _, u := range stored {
		for _, id := range byID[u] {
			out[id] = true
		}
	}
	return out, nil
}
