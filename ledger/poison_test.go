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
