package ledger_test

import (
	"context"
	"fmt"
	nurl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3/lock"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestMigrateConcurrently: two processes migrating one database at once
// (two `tollgate serve` replicas starting, or `serve` beside `tollgate
// migrate` during an upgrade) both succeed: they take turns (an upgrade
// review: one of the two failed on the other's half-made tables, "relation
// … already exists", about one try in four).
func TestMigrateConcurrently(t *testing.T) {
	ctx := context.Background()
	for round := range 3 {
		url := ledgertest.NewDatabase(t)
		var stores [2]*ledger.Store
		for i := range stores {
			s, err := ledger.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			stores[i] = s
		}
		var wg sync.WaitGroup
		var applied [2]int
		var errs [2]error
		start := make(chan struct{})
		for i, s := range stores {
			wg.Go(func() { <-start; applied[i], errs[i] = s.Migrate(ctx) })
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: Migrate %d of two at once: %v", round, i, err)
			}
		}
		if applied[0] == 0 == (applied[1] == 0) {
			t.Fatalf("round %d: the two applied %d and %d migrations; want one to apply them all and the other none", round, applied[0], applied[1])
		}
	}
}

// TestMigrateDownFromNewerRelease: rolling back a database that a newer
// release migrated needs that release's binary, which holds the Down of
// its migrations; this one's says so, naming both versions, where goose
// said only "version not found".
func TestMigrateDownFromNewerRelease(t *testing.T) {
	ctx := context.Background()
	s, err := ledger.Open(ctx, ledgertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A newer release's migration, applied by its binary.
	if err := s.ExecForTest(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, true)`); err != nil {
		t.Fatal(err)
	}
	from, n, err := s.MigrateDown(ctx, int64(all-1))
	if ledger.ErrorCode(err) != ledger.EInvalid || from != 999 || n != 0 ||
		!strings.Contains(err.Error(), "migration 999") || !strings.Contains(err.Error(), "release that added migration 999") {
		t.Fatalf("MigrateDown(%d) on a database at a newer release's 999: %d, %d, %v; want it refused, naming both versions and what to run", all-1, from, n, err)
	}
	if err := s.CheckMigrated(ctx); err != nil {
		t.Fatalf("CheckMigrated on a database ahead of the binary (old binaries run on it during a rolling upgrade): %v", err)
	}
}

// TestMigrationLockHolderNamesTheSession: while another session holds
// the migration lock, Migrate waits (until its context ends) and
// MigrationLockHolder names that session, for the log of a migration that
// waits; with none, it says nothing. A wait on a killed migrator's
// session was silent for its whole 10 minutes (a crash review).
func TestMigrationLockHolderNamesTheSession(t *testing.T) {
	ctx := context.Background()
	s, url := openFresh(t)
	if h, err := s.MigrationLockHolder(ctx); err != nil || h != "" {
		t.Fatalf("no lock held: holder %q, %v", h, err)
	}
	pid := ledgertest.HoldMigrationLock(t, url, "stuck-migrator")
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := s.Migrate(wctx); err == nil {
		t.Fatal("Migrate did not wait for the lock another session holds")
	}
	h, err := s.MigrationLockHolder(ctx)
	if err != nil || !strings.Contains(h, fmt.Sprintf("pid %d", pid)) || !strings.Contains(h, "stuck-migrator") {
		t.Fatalf("holder %q, %v; want pid %d, stuck-migrator", h, err, pid)
	}
}

// TestMigrationLockHolderNamesWhatItWaitsFor: a migrator whose statement
// waits on another session (migration 11's CREATE INDEX CONCURRENTLY
// waits for every older transaction: an export's, a pg_dump's) is named
// with the sessions it waits for, which are what to end or wait out; the
// log named only the migrator's own session (a crash review).
func TestMigrationLockHolderNamesWhatItWaitsFor(t *testing.T) {
	ctx := context.Background()
	s, url := openFresh(t)
	connect := func(app string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	blocker, migrator := connect("long-export"), connect("stuck-migrator")
	defer blocker.Close(ctx)
	defer migrator.Close(ctx)
	if _, err := blocker.Exec(ctx, "CREATE TABLE probe (x int)"); err != nil {
		t.Fatal(err)
	}
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE probe IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Exec(ctx, "SELECT pg_advisory_lock($1)", lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { _, err := migrator.Exec(ctx, "SELECT count(*) FROM probe"); waiting <- err }()
	want := fmt.Sprintf("waits for pid %d (application 'long-export'", blocker.PgConn().PID())
	var h string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(h, want) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if h, err = s.MigrationLockHolder(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(h, fmt.Sprintf("pid %d", migrator.PgConn().PID())) || !strings.Contains(h, want) {
		t.Errorf("holder %q; want the migrator and %q", h, want)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
}

// openFresh opens a store on a new database, not migrated, and returns
// it with the database's URL.
func openFresh(t *testing.T) (*ledger.Store, string) {
	t.Helper()
	url := ledgertest.NewDatabase(t)
	s, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, url
}

// TestCheckMigratedWritesNothing: a process of one role never migrates,
// and its check of an unmigrated database (a new one, or the wrong one
// named by TOLLGATE_DATABASE_URL) made goose's version table there, with
// its version 0, before saying to run `tollgate migrate`: a role wrote to
// a schema that is not Tollgate's, and another application's goose
// table of the same name, at a version past Tollgate's, was then taken for
// a migrated ledger. It reads the version and creates nothing.
func TestCheckMigratedWritesNothing(t *testing.T) {
	ctx := context.Background()
	url := ledgertest.NewDatabase(t)
	s, err := ledger.OpenExisting(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckMigrated(ctx); err == nil || !strings.Contains(err.Error(), "run `tollgate migrate`") {
		t.Fatalf("CheckMigrated on an empty database: %v, want a pointer to tollgate migrate", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(tablename, ', '), '') FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != "" {
		t.Errorf("CheckMigrated on an empty database made tables %s; want none", tables)
	}
	// Another application's database, migrated by goose past Tollgate's version.
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS goose_db_version (id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
		INSERT INTO goose_db_version (version_id, is_applied) SELECT 0, true WHERE NOT EXISTS (SELECT 1 FROM goose_db_version);
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (40, true)`); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckMigrated(ctx); err == nil || !strings.Contains(err.Error(), "run `tollgate migrate`") {
		t.Errorf("CheckMigrated on another application's goose database at version 40: %v, want it refused", err)
	}
}

// TestMigrateDownOfAnUnmigratedDatabaseWritesNothing: `tollgate migrate
// --down-to N` against a database without Tollgate's migrations (a wrong
// TOLLGATE_DATABASE_URL) made goose's version table there and reported
// nothing rolled back; against another application's goose database, at
// a version below Tollgate's last, it would run Tollgate's Down
// migrations on it. It is refused, and nothing is written.
func TestMigrateDownOfAnUnmigratedDatabaseWritesNothing(t *testing.T) {
	ctx := context.Background()
	url := ledgertest.NewDatabase(t)
	s, err := ledger.OpenExisting(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, n, err := s.MigrateDown(ctx, 0); err == nil || n != 0 {
		t.Errorf("MigrateDown(0) on an empty database: %d rolled back, %v; want it refused", n, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(tablename, ', '), '') FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != "" {
		t.Errorf("MigrateDown on an empty database made tables %s; want none", tables)
	}
	// Another application's, migrated by goose to its version 3.
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS goose_db_version;
		CREATE TABLE goose_db_version (id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true), (2, true), (3, true);
		CREATE TABLE usage_events (id bigint PRIMARY KEY, corrections text, end_user text, metadata jsonb)`); err != nil {
		t.Fatal(err)
	}
	if _, n, err := s.MigrateDown(ctx, 2); err == nil || n != 0 {
		t.Errorf("MigrateDown(2) on another application's goose database: %d rolled back, %v; want it refused", n, err)
	}
	var cols int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'usage_events'`).Scan(&cols); err != nil || cols != 4 {
		t.Errorf("the other application's table has %d columns (%v), want its 4", cols, err)
	}
}

// TestOpenCreatesTheDatabaseOnceWhenProcessesRace: two processes that
// create the ledger's database at once (`tollgate migrate` beside a
// `serve` replica, or two replicas, on a new Postgres) both open it. The
// second's CREATE DATABASE failed, not always with duplicate_database but
// with a unique violation on pg_database, and `tollgate migrate` exited 1
// with "create database: duplicate key value violates unique constraint
// pg_database_datname_index" (an upgrade review: 3 runs in 3).
func TestOpenCreatesTheDatabaseOnceWhenProcessesRace(t *testing.T) {
	ctx := context.Background()
	for round := range 4 {
		url := ledgertest.NewDatabase(t)
		u, err := nurl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(u.Path, "/")
		u.Path = "/postgres"
		admin, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize())
		admin.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var errs [4]error
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				s, err := ledger.Open(ctx, url)
				if err == nil {
					s.Close()
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: Open %d of %d at once on a missing database: %v", round, i, len(errs), err)
			}
		}
	}
}
