package ledger_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// populateLedger fills s with a ledger of every kind of row: price
// versions, a discount, events in three monthly partitions, an attempt
// not charged, credits with idempotency keys, a refund and re-ratings. It
// returns the two customers' billings and the events written.
func populateLedger(t *testing.T, s *ledger.Store) (*billing, *billing, []usage.Event) {
	t.Helper()
	ctx := context.Background()
	b, d := newBilling(t, s), newBilling(t, s)
	if _, err := s.CreateOverride(ctx, d.c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "25", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	b.price("m", "USD", "1", "10", "")
	million := usage.Tokens{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}
	var evs []usage.Event
	for m := range 3 {
		at := jan.AddDate(0, m, 3).Add(time.Duration(m) * time.Hour)
		evs = append(evs, b.event("m", at, million), d.event("m", at, million), b.event("u", at, million))
	}
	served := b.event("m", jan.Add(50*time.Hour), million)
	served.Deployment, served.Attempt = "west", 2
	failed := b.event("m", jan.Add(50*time.Hour), usage.Tokens{PromptTokens: 9})
	failed.Deployment, failed.Attempt, failed.RequestID, failed.NotCharged, failed.Status = "east", 1, served.ID, true, usage.StatusUpstreamError
	evs = append(evs, served, failed)
	b.write(evs...)
	for _, x := range []*billing{b, d} {
		if _, err := s.AddEntry(ctx, x.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "100", IdempotencyKey: "grant-" + x.c.ID, EffectiveAt: jan}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RefundEvent(ctx, evs[0].ID, "sorry"); err != nil {
		t.Fatal(err)
	}
	b.price("u", "USD", "2", "4", "")
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "5", EffectiveFrom: feb}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rerate(ctx, jan, jan.AddDate(0, 3, 0), nil); err != nil {
		t.Fatal(err)
	}
	return b, d, evs
}

// statements returns the statements of b's and d's customers for the
// months populateLedger fills.
func statements(t *testing.T, bs ...*billing) map[string]ledger.Statement {
	t.Helper()
	out := map[string]ledger.Statement{}
	for _, b := range bs {
		for _, p := range []string{"2026-01", "2026-02", "2026-03"} {
			out[b.c.ID+" "+p] = b.statement(p)
		}
	}
	return out
}

// TestMigrationsRoundTripKeepTheBooks: on a ledger of every kind of row,
// rolling back to each version from the last but one down to 2 (the
// billing ledger's) and migrating up again leaves every statement as it
// was and reconciliation clean (migration 6's Down once left the
// attempts' ids behind, and it was not).
func TestMigrationsRoundTripKeepTheBooks(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.NewStore(t)
	b, d, evs := populateLedger(t, s)
	// A replayed attempt not charged is stored again once its Down (6's)
	// dropped it; a replayed charged event never is.
	evs = slices.DeleteFunc(evs, func(e usage.Event) bool { return e.NotCharged })
	want := statements(t, b, d)
	all, _, err := s.MigrateDown(ctx, 1<<40) // the version, rolling nothing back
	if err != nil {
		t.Fatal(err)
	}
	for v := all - 1; v >= 2; v-- {
		if _, _, err := s.MigrateDown(ctx, v); err != nil {
			t.Fatalf("down to %d: %v", v, err)
		}
		if _, err := s.Migrate(ctx); err != nil {
			t.Fatalf("up from %d: %v", v, err)
		}
		if got := statements(t, b, d); !reflect.DeepEqual(got, want) {
			t.Errorf("down to %d and up: statements\n%+v\nwant\n%+v", v, got, want)
		}
		rec, err := s.Reconcile(ctx, jan, jan.AddDate(0, 3, 0))
		if err != nil || !rec.Clean {
			t.Errorf("down to %d and up: reconciliation %+v, %v", v, rec, err)
		}
		// Replays are still recognised: the events, and a credit by its key.
		if n, err := s.WriteEvents(ctx, evs); err != nil || n != 0 {
			t.Errorf("down to %d and up: the events written again stored %d, %v; want none", v, n, err)
		}
		if e, err := s.AddEntry(ctx, b.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "100", IdempotencyKey: "grant-" + b.c.ID, EffectiveAt: jan}); err != nil || e.ID != 1 {
			t.Errorf("down to %d and up: the credit asked again = %+v, %v; want entry 1", v, e, err)
		}
	}
}

// TestMigrateDownToZeroLeavesNothing: rolling a populated ledger back to
// version 0 removes every table, function and type the migrations and the
// ledger made (monthly partitions included); goose's own table stays.
func TestMigrateDownToZeroLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, url := ledgertest.NewStoreURL(t)
	populateLedger(t, s)
	if _, _, err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(x, ', '), '') FROM (
		SELECT c.relkind::text || ' ' || c.relname AS x FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname NOT LIKE 'goose_db_version%'
		UNION ALL SELECT 'f ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
		UNION ALL SELECT 't ' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public' AND t.typname NOT LIKE '%goose_db_version%') o`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != "" {
		t.Errorf("left after down to 0: %s", left)
	}
}
