package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// WriteEventsPausedForTest is WriteEvents with pause called after the
// batch's statement has run, before its transaction commits: a test holds
// the batch there while it runs what races it.
func (s *Store) WriteEventsPausedForTest(ctx context.Context, events []usage.Event, pause func()) (int, error) {
	return s.writeEvents(ctx, events, func(ctx context.Context, tx pgx.Tx, events []usage.Event, p *pricing) (int, int, error) {
		n, unpriced, err := writeStaged(ctx, tx, events, p)
		if err == nil {
			pause()
		}
		return n, unpriced, err
	})
}
