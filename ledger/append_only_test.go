package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEveryLedgerTableIsAppendOnly: "nothing on the ledger is updated or
// deleted; corrections and refunds are new entries" (DESIGN.md, invariant
// 5). TestLedgerIsAppendOnly tries the usage events; the entries (credits,
// adjustments, refunds, rerates), the price book, the customers' overrides
// and the attempts not charged are the ledger too, and their triggers
// refuse UPDATE and DELETE alike.
func TestEveryLedgerTableIsAppendOnly(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10", Memo: "top-up"}); err != nil {
		t.Fatal(err)
	}
	attempt := newEvent(c.ID, k.ID, "m", time.Now(), usage.Tokens{PromptTokens: 5})
	attempt.NotCharged, attempt.Attempt, attempt.RequestID = true, 1, uuid.NewString()
	attempt.Status, attempt.HTTPStatus = usage.StatusUpstreamError, 502
	if _, err := s.WriteEvents(ctx, []usage.Event{attempt}); err != nil {
		t.Fatal(err)
	}
	for table, set := range map[string]string{
		"ledger_entries":  "memo = 'changed'",
		"prices":          "input_micros = 0",
		"price_overrides": "discount_bp = 0",
		"usage_attempts":  "prompt_tokens = 0",
	} {
		if n, err := s.QueryInt64ForTest(ctx, "SELECT count(*) FROM "+table); err != nil || n == 0 {
			t.Fatalf("%s holds %d rows (%v): the test wrote none", table, n, err)
		}
		for _, stmt := range []string{"UPDATE " + table + " SET " + set, "DELETE FROM " + table} {
			if err := s.ExecForTest(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: %v; want it refused, the ledger being append-only", stmt, err)
			}
		}
	}
}

// TestLedgerTablesRefuseTruncate: the triggers above refuse UPDATE and
// DELETE row by row, and TRUNCATE fires no row trigger: an audit emptied
// ledger_entries, and a month's usage_events partition, with one
// statement each as the role Tollgate connects as (and as the parent's
// row triggers let through a TRUNCATE of one partition, a trigger on
// usage_events alone would not hold its months). Every ledger table, and
// every month's partition, made before the migration or after it, must
// refuse it too.
func TestLedgerTablesRefuseTruncate(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10", Memo: "top-up"}); err != nil {
		t.Fatal(err)
	}
	attempt := newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 5})
	attempt.NotCharged, attempt.Attempt, attempt.RequestID = true, 1, uuid.NewString()
	attempt.Status, attempt.HTTPStatus = usage.StatusUpstreamError, 502
	events := []usage.Event{attempt, newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 7})}
	if _, err := s.WriteEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	tables := []string{"ledger_entries", "prices", "price_overrides", "usage_attempts", "usage_events", "usage_events_2026_01"}
	check := func(when string) {
		t.Helper()
		for _, table := range tables {
			if n, err := s.QueryInt64ForTest(ctx, "SELECT count(*) FROM "+table); err != nil || n == 0 {
				t.Fatalf("%s: %s holds %d rows (%v)", when, table, n, err)
			}
			// A TRUNCATE let through is undone by the exception after it,
			// so that every table is tried on the ledger as it was.
			err := s.ExecForTest(ctx, "DO $$ BEGIN TRUNCATE "+table+" CASCADE; "+
				"RAISE EXCEPTION 'TRUNCATE let through'; END $$")
			if err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: TRUNCATE %s: %v; want it refused, the ledger being append-only", when, table, err)
			}
		}
	}
	check("a partition made after the migration")
	// A partition that was there when the migration ran: roll it back and
	// apply it again.
	version, _, err := s.MigrateDown(ctx, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.MigrateDown(ctx, version-1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	check("a partition made before the migration")
}

// TestMigrationNoTruncateAgainAfterPartitionMade: rolled back to 13 (to
// roll a release back), a process of this release still running makes the
// next month's partition, with its TRUNCATE trigger (makePartition); the
// migration applied again must take that partition as it is, not stop on
// the trigger it already has.
func TestMigrationNoTruncateAgainAfterPartitionMade(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	if _, _, err := s.MigrateDown(ctx, 13); err != nil {
		t.Fatal(err)
	}
	ev := newEvent(c.ID, k.ID, "m", time.Date(2031, 3, 5, 0, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 5})
	if _, err := s.WriteEvents(ctx, []usage.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate up again after a partition was made at 13: %v", err)
	}
	if err := s.ExecForTest(ctx, "TRUNCATE usage_events_2031_03"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("TRUNCATE of the month: %v; want it refused", err)
	}
}

// TestAPartitionAnOlderBinaryMadeRefusesTruncate: during a rolling
// upgrade, a process of a release from before migration 14, still
// running on the migrated ledger, makes a month's partition without the
// TRUNCATE trigger (it knows nothing of it), and the migration, applied
// already, does not run again. The first write of this release to that
// month finds the partition there and gives it the trigger; a table of
// that name an operator detached (an archived month) is left as it is.
func TestAPartitionAnOlderBinaryMadeRefusesTruncate(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE usage_events_2032_07 (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
		`ALTER TABLE usage_events ATTACH PARTITION usage_events_2032_07 FOR VALUES FROM ('2032-07-01T00:00:00Z') TO ('2032-08-01T00:00:00Z')`,
		`CREATE TABLE usage_events_2032_09 (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`, // detached: an archive
	} {
		if err := s.ExecForTest(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ev := newEvent(c.ID, k.ID, "m", time.Date(2032, 7, 5, 0, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 5})
	if _, err := s.WriteEvents(ctx, []usage.Event{ev}); err != nil {
		t.Fatal(err)
	}
	err := s.ExecForTest(ctx, "DO $$ BEGIN TRUNCATE usage_events_2032_07; RAISE EXCEPTION 'TRUNCATE let through'; END $$")
	if err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("TRUNCATE of a month an older binary made: %v; want it refused, the ledger being append-only", err)
	}
	late := newEvent(c.ID, k.ID, "m", time.Date(2032, 9, 5, 0, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 5})
	_, _ = s.WriteEvents(ctx, []usage.Event{late}) // no partition takes it: refused, as before
	if err := s.ExecForTest(ctx, "TRUNCATE usage_events_2032_09"); err != nil {
		t.Errorf("TRUNCATE of a detached table of a month's name: %v; want it left as the operator had it", err)
	}
}
