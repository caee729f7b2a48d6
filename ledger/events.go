package ledger

import (
	"context"
	"fmt"
	"slices"

	"github.com/tollgate-dev/tollgate/meter"
)

// WriteEvents rates and stores a batch of usage events in one transaction,
// at most once per event id: an event whose id is already in the ledger (a
// redelivery) is skipped. It returns how many events were new.
//
// Each event is rated with the price version of its model in force at the
// event's time; an event with no such version is stored with cost 0 and no
// price version (unpriced), never dropped. It implements meter.Store; an error
// means nothing of the batch was stored.
func (s *Store) WriteEvents(ctx context.Context, events []meter.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	models := make([]string, 0, 4)
	for i := range events {
		if !slices.Contains(models, events[i].Model) {
			models = append(models, events[i].Model)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	book := map[string][]Price{}
	rows, err := tx.Query(ctx,
		`SELECT id, model, currency, input_micros, cached_input_micros, cache_write_micros,
		   output_micros, effective_from FROM prices WHERE model = ANY($1) ORDER BY model, effective_from`,
		models)
	if err != nil {
		return 0, fmt.Errorf("load prices: %w", err)
	}
	for rows.Next() {
		var p Price
		if err := rows.Scan(&p.ID, &p.Model, &p.Currency, &p.InputMicros, &p.CachedInputMicros,
			&p.CacheWriteMicros, &p.OutputMicros, &p.EffectiveFrom); err != nil {
			return 0, fmt.Errorf("load prices: %w", err)
		}
		book[p.Model] = append(book[p.Model], p)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("load prices: %w", err)
	}
	cols, err := newEventColumns(events, book)
	if err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, insertEvents, cols.args()...)
	if err != nil {
		return 0, fmt.Errorf("insert events: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
