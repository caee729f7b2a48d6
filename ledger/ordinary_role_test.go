package ledger_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLedgerAsAnOrdinaryRole: an operator runs Tollgate as an ordinary
// role that owns its database, not as a superuser (who could disable or
// bypass the append-only triggers the ledger's integrity rests on). Every
// migration, up and down, and what the processes and the CLI do at run
// time (monthly partitions and their TRUNCATE triggers, advisory locks,
// COPY in and out, LISTEN/NOTIFY, re-rating, export, reconciliation) must
// work for such a role; and the triggers hold against it.
func TestLedgerAsAnOrdinaryRole(t *testing.T) {
	ctx := context.Background()
	dbURL, role := ledgertest.NewOwnedDatabase(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var user string
	var super, createRole, createDB bool
	if err := conn.QueryRow(ctx, `SELECT current_user, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles
		WHERE rolname = current_user`).Scan(&user, &super, &createRole, &createDB); err != nil {
		t.Fatal(err)
	}
	if user != role || super || createRole || createDB {
		t.Fatalf("connected as %s (superuser %v, createrole %v, createdb %v); want %s, an ordinary role",
			user, super, createRole, createDB, role)
	}

	s, err := ledger.Open(ctx, dbURL) // as `tollgate migrate` and `serve` open it
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Migrate(ctx)
	if err != nil || all < 14 {
		t.Fatalf("Migrate as %s = %d, %v; want every migration applied", role, all, err)
	}
	if err := s.CheckMigrated(ctx); err != nil {
		t.Fatal(err)
	}

	// The key sync: LISTEN, and the outbox a trigger fills with NOTIFY.
	woke := make(chan struct{}, 1)
	lctx, stop := context.WithCancel(ctx)
	listening := make(chan error, 1)
	go func() {
		listening <- s.ListenKeyChanges(lctx, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { stop(); <-listening }()
	select { // the wake it gives once listening
	case <-woke:
	case err := <-listening:
		t.Fatalf("ListenKeyChanges as %s: %v", role, err)
	}

	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	c, k := newCustomer(t, s)
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10", Memo: "top-up"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PublishKeyChanges(ctx, 1000, func(context.Context, usage.Changes) error { return nil }); err != nil {
		t.Fatal(err)
	}

	// Events of two months: each makes its month's partition (an advisory
	// lock, CREATE TABLE, ATTACH PARTITION, CREATE TRIGGER), written by
	// COPY into the staging table.
	attempt := newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 5})
	attempt.NotCharged, attempt.Attempt, attempt.RequestID = true, 1, uuid.NewString()
	attempt.Status, attempt.HTTPStatus = usage.StatusUpstreamError, 502
	feb := jan.AddDate(0, 1, 0)
	events := []usage.Event{attempt,
		newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 7, CompletionTokens: 3}),
		newEvent(c.ID, k.ID, "m", feb.Add(time.Hour), usage.Tokens{PromptTokens: 11})}
	if _, err := s.WriteEvents(ctx, events); err != nil {
		t.Fatalf("WriteEvents as %s: %v", role, err)
	}
	if got, err := s.Event(ctx, events[2].ID); err != nil || got.Usage.PromptTokens != 11 || got.Unpriced {
		t.Fatalf("Event = %+v, %v", got, err)
	}
	if page, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID}); err != nil || len(page.Data) == 0 {
		t.Fatalf("Usage = %+v, %v", page, err)
	}
	if _, err := s.Statement(ctx, c.ID, "2026-01"); err != nil {
		t.Fatal(err)
	}

	// `tollgate rerate`, `export` and `reconcile`.
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "3", Output: "4",
		EffectiveFrom: feb}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Rerate(ctx, jan, feb.AddDate(0, 1, 0), nil); err != nil || r.Adjusted != 1 {
		t.Fatalf("Rerate as %s = %+v, %v; want February's event adjusted", role, r, err)
	}
	var out bytes.Buffer
	if n, err := s.ExportLines(ctx, jan, feb.AddDate(0, 1, 0), &out); err != nil || n == 0 {
		t.Fatalf("ExportLines as %s = %d, %v", role, n, err)
	}
	if r, err := s.Reconcile(ctx, jan, feb.AddDate(0, 1, 0)); err != nil || !r.Clean {
		t.Fatalf("Reconcile as %s = %+v, %v; want clean", role, r, err)
	}
	if h, err := s.MigrationLockHolder(ctx); err != nil || h != "" {
		t.Fatalf("MigrationLockHolder = %q, %v", h, err)
	}
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Error("the key outbox's NOTIFY did not reach the listener")
	}

	// The triggers hold against the role that owns the tables (a superuser
	// could set session_replication_role = replica and pass them all).
	for _, q := range []string{"TRUNCATE usage_events_2026_02", "DELETE FROM ledger_entries", "UPDATE prices SET input_micros = 0"} {
		if err := s.ExecForTest(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s as %s: %v; want it refused, the ledger being append-only", q, role, err)
		}
	}
	if err := s.ExecForTest(ctx, "SET session_replication_role = replica"); err == nil {
		t.Errorf("SET session_replication_role as %s succeeded; the role can switch the triggers off", role)
	}

	// `tollgate migrate --down` to 0 and up again, as the role.
	if _, _, err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatalf("MigrateDown(0) as %s: %v", role, err)
	}
	if n, err := s.Migrate(ctx); err != nil || n != all {
		t.Fatalf("Migrate again as %s = %d, %v; want %d", role, n, err, all)
	}
}
