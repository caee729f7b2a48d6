package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3/lock"
)

// MigrationLockHolder describes the database session that holds the
// migration lock (goose's session-level advisory lock, lock.DefaultLockID,
// which Migrate and MigrateDown take): its backend pid, application name,
// state, and its last statement (how long ago it began, and its
// first 200 characters); "" when no session holds it. A migrator killed
// mid-statement leaves its session holding the lock until the statement
// ends: pg_terminate_backend(pid) ends it sooner. When the holder's
// statement waits on other sessions (pg_blocking_pids: migration 11's
// CREATE INDEX CONCURRENTLY waits for every transaction older than it, an
// export's or a pg_dump's), it names them too, each with its state, how
// long its transaction has run and its statement: they, not the holder,
// are what to end or wait for (a crash review: the log named only the
// migrator's own session). It returns the database's error.
func (s *Store) MigrationLockHolder(ctx context.Context) (string, error) {
	var (
		pid                         int32
		app, state, query, blockers string
		since                       time.Duration
	)
	err := s.pool.QueryRow(ctx, `
		SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''),
		  coalesce(clock_timestamp() - a.query_start, '0'), left(coalesce(a.query, ''), 200),
		  coalesce((SELECT string_agg(format('pid %s (application %L, %s, its transaction begun %s ago: %L)', b.pid,
		      coalesce(b.application_name, ''), coalesce(b.state, ''),
		      date_trunc('second', clock_timestamp() - coalesce(b.xact_start, b.backend_start)), left(coalesce(b.query, ''), 100)), '; ' ORDER BY b.pid)
		    FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))), '')
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND l.objsubid = 1
		LIMIT 1`, lock.DefaultLockID).Scan(&pid, &app, &state, &since, &query, &blockers)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil
		}
		return "", fmt.Errorf("migration lock holder: %w", err)
	}
	h := fmt.Sprintf("pid %d (application %q, %s; its last statement, begun %s ago: %q)",
		pid, app, state, since.Round(time.Second), query)
	if blockers != "" {
		h += "; that statement waits for " + blockers
	}
	return h, nil
}
