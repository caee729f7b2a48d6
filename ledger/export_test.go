package ledger

import "context"

// ExecForTest runs a statement directly, for tests that check what the
// database itself refuses.
func (s *Store) ExecForTest(ctx context.Context, sql string) error {
	_, err := s.pool.Exec(ctx, sql)
	return err
}
