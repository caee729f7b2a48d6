package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestMigrationGivesEarlierRerateEntriesAListCost: rerate entries made
// before migration 7 carry no list-cost change, and the rollups they
// touched kept a stale list cost (re-rating a priced event did not move
// it). The migration gives them what can be known (the entry that first
// priced an event: its charge; the others: 0) and recomputes those rollup
// rows, so that reconciliation, which now compares list costs, is clean;
// re-rating again then brings the list costs to the price book.
func TestMigrationGivesEarlierRerateEntriesAListCost(t *testing.T) {
	s, url := ledgertest.NewStoreURL(t)
	ctx := context.Background()
	b, d := newBilling(t, s), newBilling(t, s)
	if _, err := s.CreateOverride(ctx, d.c.ID, ledger.OverrideInput{DiscountPercent: "50", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	at, million := jan.Add(20*24*time.Hour), usage.Tokens{CompletionTokens: 1_000_000}
	b.price("m", "USD", "0", "10", "")
	b.write(b.event("m", at, million), b.event("u", at, million)) // u: unpriced
	d.write(d.event("u", at, million))
	b.price("u", "USD", "0", "4", "")
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "0", Output: "1",
		EffectiveFrom: jan.Add(9 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rerate(ctx, jan, feb, nil); err != nil {
		t.Fatal(err)
	}
	// As the ledger stood before migration 7: no list-cost change on the
	// entries, and the re-rated priced event's list cost stale (10, not 1).
	if _, _, err := s.MigrateDown(ctx, 6); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE usage_hourly SET cost_e12 = 10e12 WHERE model = 'm'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	listCosts := func(when string, want map[string]string) {
		t.Helper()
		for who, w := range want {
			c, model, _ := strings.Cut(who, "/")
			id := map[string]string{"b": b.c.ID, "d": d.c.ID}[c]
			var list string
			if err := conn.QueryRow(ctx, `SELECT (sum(cost_e12) / 1e12)::text FROM usage_hourly
				WHERE customer_id = $1 AND model = $2 AND currency = 'USD'`, id, model).Scan(&list); err != nil {
				t.Fatal(err)
			}
			if !dec(t, list).Equal(dec(t, w)) {
				t.Errorf("%s: list cost of %s %s, want %s", when, who, list, w)
			}
		}
		if rec, err := s.Reconcile(ctx, jan, feb); err != nil || !rec.Clean {
			t.Errorf("%s: reconciliation %+v, %v; want clean", when, rec, err)
		}
	}
	// Undiscounted, first priced: exact; discounted, first priced: its
	// charge; re-rated when priced: as it was.
	listCosts("after the migration", map[string]string{"b/m": "10", "b/u": "4", "d/u": "2"})
	if res, err := s.Rerate(ctx, jan, feb, nil); err != nil || res.Adjusted != 2 {
		t.Errorf("re-rating after the migration = %+v, %v; want the two list costs corrected", res, err)
	}
	listCosts("re-rated after the migration", map[string]string{"b/m": "1", "b/u": "4", "d/u": "4"})
}

// TestOpenExistingDoesNotCreate: `tollgate migrate --down-to N` on a
// database URL that names no database (a typo, the wrong server) used to
// create an empty database and report nothing rolled back. OpenExisting,
// which it uses, refuses a missing database and leaves the server as it
// was; Open, which serve and migrate use, still creates it.
func TestOpenExistingDoesNotCreate(t *testing.T) {
	ctx := context.Background()
	dbURL, exists := ledgertest.MissingDatabase(t)
	if s, err := ledger.OpenExisting(ctx, dbURL); err == nil || !strings.Contains(err.Error(), "does not exist") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenExisting of a missing database = %v, want an error saying it does not exist", err)
	}
	if exists() {
		t.Fatalf("OpenExisting created database %s", dbURL)
	}
	s, err := ledger.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !exists() {
		t.Fatalf("Open did not create database %s", dbURL)
	}
}

// TestMigrationSixDownKeepsEventIDsToEvents: migration 6 keeps the attempts
// not charged in usage_attempts and claims their ids in event_ids; its
// Down dropped the table but left the ids, so that at version 5 (where
// every id in event_ids is an event's) and after migrating up again,
// reconciliation counted an id without an event for each attempt, and was
// never clean again.
func TestMigrationSixDownKeepsEventIDsToEvents(t *testing.T) {
	ctx := context.Background()
	s, c, k := setup(t)
	at := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	served := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 10})
	served.Deployment, served.Attempt = "west", 2
	failed := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 10})
	failed.Deployment, failed.Attempt, failed.RequestID, failed.NotCharged, failed.Status = "east", 1, served.ID, true, usage.StatusUpstreamError
	if _, err := s.WriteEvents(ctx, []usage.Event{served, failed}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.MigrateDown(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecForTest(ctx, `DO $$ BEGIN
		IF (SELECT count(*) FROM event_ids) <> (SELECT count(*) FROM usage_events) THEN
			RAISE EXCEPTION 'at version 5: % ids in event_ids, % events', (SELECT count(*) FROM event_ids), (SELECT count(*) FROM usage_events);
		END IF; END $$`); err != nil {
		t.Error(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Reconcile(ctx, at.Truncate(time.Hour), at.Add(time.Hour)); err != nil || !rec.Clean || rec.IDsWithoutEvent != 0 {
		t.Errorf("reconciliation after migration 6's Down and Up: %+v, %v; want clean", rec, err)
	}
}

// TestMigration12DoesNotHoldLedgerEntriesBehindAReader: migration 12 adds
// two columns to ledger_entries, which needs the table to itself for an
// instant. Its ALTER TABLE waited in the lock queue for every open read of
// the table (an export downloading for minutes), and every credit,
// refund, statement and request-log read queued behind it for as long: a
// credit asked while an upgrade waited on a reader never answered. It now
// tries for the lock a moment at a time, and lets them through between.
func TestMigration12DoesNotHoldLedgerEntriesBehindAReader(t *testing.T) {
	ctx := context.Background()
	s, url := ledgertest.NewStoreURL(t)
	b := newBilling(t, s)
	if _, _, err := s.MigrateDown(ctx, 11); err != nil {
		t.Fatal(err)
	}
	reader, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	tx, err := reader.Begin(ctx) // an export, reading the entries
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM ledger_entries`); err != nil {
		t.Fatal(err)
	}
	// The watch has a connection of its own: in the reader's transaction,
	// pg_stat_activity is the snapshot its first read took, which a
	// migration started after it never enters (the test hung on a fast VM).
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	migrated := make(chan error, 1)
	go func() { _, err := s.Migrate(ctx); migrated <- err }()
	// Wait until migration 12 is at work (waiting for the reader).
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting bool
		if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
			AND query LIKE '%ADD COLUMN override_id%' AND pid <> pg_backend_pid())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("migration 12 was not seen at work within 30 s")
		}
		select {
		case err := <-migrated:
			t.Fatalf("Migrate ended while a reader held ledger_entries: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A credit meanwhile is written; the bound only ends the test when it
	// is not (it waited as long as the reader).
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.AddEntry(cctx, b.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "1"}); err != nil {
		t.Errorf("a credit while migration 12 waits for a reader: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate once the reader ended: %v", err)
	}
	if err := s.CheckMigrated(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestURLWithAnAtInItsPasswordIsRefusedUnshown: a password holding an "@"
// not percent-encoded (postgres://u:p@ssword@host/db, a new user's first
// URL) was parsed as the password "p" on the host "ssword@host", so `serve`
// and `migrate` logged "connect to database "db" on ssword@host:5432 …
// lookup ssword@host: no such host": the rest of the password in the log,
// and no word of the cause; `config check` passed it. It is refused before
// any connection, saying to write the "@" as %40, without the host.
func TestURLWithAnAtInItsPasswordIsRefusedUnshown(t *testing.T) {
	for _, u := range []string{
		"postgres://tollgate:p@ssw0rd-secret@127.0.0.1:5432/rv_never?sslmode=disable",
		"host=ssw0rd-secret@127.0.0.1 user=tollgate dbname=rv_never",
	} {
		check := ledger.CheckURL(u)
		s, open := ledger.Open(context.Background(), u)
		if s != nil {
			s.Close()
		}
		ls, lazy := ledger.OpenLazy(u)
		if ls != nil {
			ls.Close()
		}
		for name, err := range map[string]error{"CheckURL": check, "Open": open, "OpenLazy": lazy} {
			if err == nil || strings.Contains(err.Error(), "ssw0rd-secret") || !strings.Contains(err.Error(), "%40") {
				t.Errorf("%s(%q) = %v; want an error saying to write @ as %%40, without the password's rest", name, u, err)
			}
		}
	}
}

// TestURLWithASlashInItsPasswordIsRefusedUnshown: a password holding a "/"
// not percent-encoded ("postgres://u:pa/ss@host/db") ends the URL's host
// part at the "/": pgx answered "invalid port", naming neither the cause
// nor the cure, and "u:12/ss@host/db" parsed without error as host "u",
// port 12 and a database named after the password's rest. Either is now
// refused saying to write "/" as %2F, the password unshown; a "/" that is
// percent-encoded, a "#" or a "?" in a password (which pgx, as libpq,
// reads as the password's), and an "@" in a query parameter still parse.
func TestURLWithASlashInItsPasswordIsRefusedUnshown(t *testing.T) {
	for _, u := range []string{
		"postgres://tollgate:pa/ssw0rd-secret@127.0.0.1:5432/rv_never?sslmode=disable",
		"postgres://tollgate:12/ssw0rd-secret@127.0.0.1/rv_never",
		"postgres://tollgate:pa/ssw0rd-secret?x@127.0.0.1/rv_never",
		"postgresql://to/ssw0rd-secret:pw@127.0.0.1/rv_never",
	} {
		check := ledger.CheckURL(u)
		ls, lazy := ledger.OpenLazy(u)
		if ls != nil {
			ls.Close()
		}
		for name, err := range map[string]error{"CheckURL": check, "OpenLazy": lazy} {
			if err == nil || strings.Contains(err.Error(), "ssw0rd-secret") || !strings.Contains(err.Error(), "%2F") {
				t.Errorf("%s(%q) = %v; want an error saying to write / as %%2F, without the password", name, u, err)
			}
		}
	}
	for _, u := range []string{
		"postgres://tollgate:pa%2Fss@127.0.0.1:5432/rv_never",
		"postgres://tollgate:pa#ss?x@127.0.0.1:5432/rv_never",
		"postgres://127.0.0.1:5432/rv_never?user=me@corp&sslmode=disable",
		"host=127.0.0.1 user=tollgate password=pa/ss dbname=rv_never",
	} {
		if err := ledger.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v; want it taken", u, err)
		}
	}
}
