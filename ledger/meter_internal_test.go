package ledger

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// QueryInt64sForTest runs a query returning one integer column, for
// benchmarks that look at the database's own processes.
func (s *Store) QueryInt64sForTest(ctx context.Context, sql string) ([]int64, error) {
	rows, err := s.pool.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// ExplainWriteForTest runs the batch statement of WriteEvents on events
// under EXPLAIN (ANALYZE, BUFFERS, WAL) in a transaction it rolls back,
// and returns the plan with the time of each step.
func (s *Store) ExplainWriteForTest(ctx context.Context, events []usage.Event) (string, error) {
	if err := s.ensurePartitions(ctx, events); err != nil {
		return "", err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	p, err := loadPricing(ctx, tx, events)
	if err != nil {
		return "", err
	}
	cols, err := newEventColumns(events, p)
	if err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, WAL) "+writeBatch, cols.args()...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// ExplainRerateLoadForTest returns Postgres's plan of re-rating's read of
// the batch of [from, to) from its start, with enable_seqscan off: the
// plan the indexes allow, whatever the table's size.
func (s *Store) ExplainRerateLoadForTest(ctx context.Context, from, to time.Time) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+rerateLoadQuery, pgx.QueryExecModeExec, from.Add(-time.Microsecond), maxUUID, from, to, rerateBatch)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// SettingForTest returns the session's value of a Postgres setting.
func (s *Store) SettingForTest(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}
