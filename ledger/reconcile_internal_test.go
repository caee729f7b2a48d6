package ledger

import (
	"context"
	"time"
)

// UseClockForTest makes the store read the time from now, for tests of
// entries whose effective time is "now" (Reverse, RefundEvent).
func (s *Store) UseClockForTest(now func() time.Time) { s.now = now }

// QueryInt64ForTest runs a query returning one integer, for tests and
// benchmarks that measure the database itself (sizes, counts).
func (s *Store) QueryInt64ForTest(ctx context.Context, sql string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, sql).Scan(&n)
	return n, err
}
