package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestWriteEventsRefusesDataAsBatchRefused: data Postgres cannot take (a
// NUL in a string, a rollup beyond bigint) is reported as
// usage.ErrBatchRefused, which the worker isolates, and not as an error to
// retry forever. The events here skip Normalize, as a foreign publisher's
// would before the worker's own Normalize.
func TestWriteEventsRefusesDataAsBatchRefused(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Now().UTC()
	fine := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 5})
	nul := newEvent(c.ID, k.ID, "sim/x\x00y", at, usage.Tokens{PromptTokens: 5})
	if _, err := s.WriteEvents(ctx, []usage.Event{fine, nul}); !errors.Is(err, usage.ErrBatchRefused) {
		t.Fatalf("a NUL in the model: %v, want ErrBatchRefused", err)
	}
	// Two unpriced events whose hourly rollup overflows bigint.
	big := usage.Tokens{PromptTokens: 1 << 62, CompletionTokens: 1}
	a, b := newEvent(c.ID, k.ID, "m", at, big), newEvent(c.ID, k.ID, "m", at, big)
	if _, err := s.WriteEvents(ctx, []usage.Event{a, b}); !errors.Is(err, usage.ErrBatchRefused) {
		t.Fatalf("a rollup beyond bigint: %v, want ErrBatchRefused", err)
	}
	// Nothing of either batch was stored, and the ledger takes the rest.
	if n, err := s.WriteEvents(ctx, []usage.Event{fine, a}); err != nil || n != 2 {
		t.Fatalf("WriteEvents = %d, %v; want 2 new", n, err)
	}
	// A lost connection is not a data error: the worker retries it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.WriteEvents(cctx, []usage.Event{newEvent(c.ID, k.ID, "m", at, usage.Tokens{})}); err == nil || errors.Is(err, usage.ErrBatchRefused) {
		t.Fatalf("a cancelled write: %v, want a transient error", err)
	}
}

// TestWriteEventsKeepsCorrections: what Normalize corrected is stored with
// the event.
func TestWriteEventsKeepsCorrections(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	e := newEvent(c.ID, k.ID, "m", time.Now().UTC(), usage.Tokens{PromptTokens: 10, CachedTokens: 1_000_000})
	if !e.Normalize() {
		t.Fatal("nothing to normalize")
	}
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	n, err := s.QueryInt64ForTest(ctx, `SELECT count(*) FROM usage_events WHERE id = '`+e.ID+
		`' AND corrections = 'cache_over_prompt' AND cached_tokens = 10 AND prompt_tokens = 10`)
	if err != nil || n != 1 {
		t.Fatalf("stored corrected events = %d, %v; want 1", n, err)
	}
}

// TestALostPartitionIsMadeAgain: the Store caches the months whose
// partition it made. When the partition goes away under a running worker
// (docs/operations.md: restore Postgres to an earlier point and let the
// workers replay what JetStream holds), the insert fails with 23514 "no
// partition of relation found for row", which batchError calls data: the
// worker dead-lettered every event of that month one by one, though a
// restarted worker stores them.
func TestALostPartitionIsMadeAgain(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Date(2030, 5, 10, 12, 0, 0, 0, time.UTC)
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 1})}); err != nil {
		t.Fatal(err)
	}
	// The database is restored to a point before May 2030's partition
	// existed (here: the partition is dropped, and its ids with it, as a
	// real restore has it; a month dropped with its ids kept is an
	// archived one, TestAnArchivedMonthIsNotMadeAgain).
	if err := s.ExecForTest(ctx, `DROP TABLE usage_events_2030_05`); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecForTest(ctx, `DELETE FROM event_ids WHERE occurred_at >= '2030-05-01Z' AND occurred_at < '2030-06-01Z'`); err != nil {
		t.Fatal(err)
	}
	e := newEvent(c.ID, k.ID, "m", at.Add(time.Hour), usage.Tokens{PromptTokens: 2})
	n, err := s.WriteEvents(ctx, []usage.Event{e})
	if errors.Is(err, usage.ErrBatchRefused) {
		t.Fatalf("a good event refused as data (the worker dead-letters it): %v", err)
	}
	if err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v; want 1 new", n, err)
	}
}
