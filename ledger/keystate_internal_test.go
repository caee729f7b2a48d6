package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// KeyStateAroundForTest reads key keyID's state as a full sync does, in
// a transaction of its own, calling between just before the states'
// query (after every statement before it).
func (s *Store) KeyStateAroundForTest(ctx context.Context, keyID string, between func()) (usage.KeyState, error) {
	var st usage.KeyState
	err := pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
		keys, err := queryKeyStates(ctx, pausing{tx, between}, `WHERE k.id = $2`, keyID)
		if err == nil && len(keys) == 1 {
			st = keys[0].State
		}
		return err
	})
	return st, err
}

// pausing calls pause before each Query.
type pausing struct {
	pgx.Tx
	pause func()
}

func (p pausing) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p.pause()
	return p.Tx.Query(ctx, sql, args...)
}
