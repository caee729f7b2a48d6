package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestMigrationsUpAndDown: every migration applies and rolls back, and
// the second one carries events written under the first through both ways.
func TestMigrationsUpAndDown(t *testing.T) {
	ctx := context.Background()
	s, err := ledger.Open(ctx, ledgertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Migrate(ctx)
	if err != nil || all < 2 {
		t.Fatalf("Migrate = %d, %v", all, err)
	}
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 5, 5, 0, 0, 0, time.UTC)
	e := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 7, CompletionTokens: 3})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	if from, n, err := s.MigrateDown(ctx, 1); err != nil || from != int64(all) || n != all-1 {
		t.Fatalf("MigrateDown(1) = %d, %d, %v; want from %d, %d rolled back", from, n, err, all, all-1)
	}
	if from, n, err := s.MigrateDown(ctx, 5); err != nil || from != 1 || n != 0 {
		t.Fatalf("MigrateDown(5) at version 1 = %d, %d, %v; want nothing done", from, n, err)
	}
	if err := s.ExecForTest(ctx, `SELECT 1 FROM usage_events WHERE id = '`+e.ID+`' AND prompt_tokens = 7`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Migrate(ctx); err != nil || n != all-1 { // every migration after the first
		t.Fatalf("Migrate after down = %d, %v; want %d", n, err, all-1)
	}
	got, err := s.Event(ctx, e.ID)
	if err != nil || got.Usage.PromptTokens != 7 || !got.Unpriced {
		t.Fatalf("event after down and up = %+v, %v", got, err)
	}
	page, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID})
	if err != nil || len(page.Data) != 1 || page.Data[0].Requests != 1 {
		t.Fatalf("rollups rebuilt by the migration = %+v, %v", page, err)
	}
	if _, _, err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecForTest(ctx, `SELECT 1 FROM customers`); err == nil {
		t.Fatal("tables remain after migrating down to 0")
	}
}
