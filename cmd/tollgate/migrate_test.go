package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/migrations"
)

// TestMigrateDownToNegativeIsRefused: `tollgate migrate --down-to N`
// rolls back (docs/operations.md, "Upgrades" step 4; `tollgate --help`:
// "migrate [--down-to N] ... (or roll back to N)"). The flag's default, -1,
// doubled as "not given", so an operator's `--down-to -1` (a typo, or a
// script's unset variable arithmetic) was silently taken as a plain
// `tollgate migrate` and applied every pending migration: the opposite of
// what was asked, logged as "migrations applied". It must be refused as bad
// usage (exit 2) before the database is touched. Here the database is
// unreachable, so code that opens it first fails on the connection
// instead, not on the flag.
func TestMigrateDownToNegativeIsRefused(t *testing.T) {
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range []string{"-1", "-5", "two"} {
		err := migrate(ctx, slog.New(slog.DiscardHandler), []string{"--down-to", v}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "down-to") {
			t.Fatalf("migrate --down-to %s = %v; want a usage error naming --down-to, before any database access", v, err)
		}
		var stderr bytes.Buffer
		if code := serverExit("migrate", err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "run 'tollgate migrate --help'") {
			t.Fatalf("migrate --down-to %s: exit %d, stderr %q; want exit 2 and a pointer to --help", v, code, stderr.String())
		}
	}
}

// TestMigrateDownToSaysWhoHoldsTheLock: `tollgate migrate --down-to N`, an
// upgrade's undo (docs/operations.md, "Upgrades" step 4), takes the same
// migration lock as `tollgate migrate` and `serve`, and waits up to 10
// minutes for it. The docs promise that a migrator waiting for it logs every
// 15 s which session holds it; `tollgate migrate` did, but the rollback
// waited in silence, so an operator behind a killed migrator's session saw
// nothing for minutes. It must name the holder as the upgrade does.
func TestMigrateDownToSaysWhoHoldsTheLock(t *testing.T) {
	url := ledgertest.NewDatabase(t)
	t.Setenv("TOLLGATE_DATABASE_URL", url)
	if err := migrate(t.Context(), slog.New(slog.DiscardHandler), nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	ledgertest.HoldMigrationLock(t, url, "stuck-migrator")
	defer func(d time.Duration) { migrateReportEvery = d }(migrateReportEvery)
	migrateReportEvery = 50 * time.Millisecond
	logs := &syncBuffer{}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- migrate(ctx, slog.New(slog.NewJSONHandler(logs, nil)), []string{"--down-to", "0"}, io.Discard)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "the migration lock is held") || !strings.Contains(logs.String(), "stuck-migrator") {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("30 s into the rollback's wait for the migration lock, the log says nothing of its holder:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err == nil {
		t.Fatal("migrate --down-to 0 stopped while waiting for the lock and reported success")
	}
}

// TestMigrateDownToNotBelowRollsNothingBack: `tollgate migrate --down-to N`
// with N not below the database's version does nothing (as goose's DownTo:
// no error, so that an undo run twice is not a failure), and says so in a
// warning naming both versions, where it used to log "migrations rolled
// back to_version N". Below it, it rolls back and says how many.
func TestMigrateDownToNotBelowRollsNothingBack(t *testing.T) {
	url := ledgertest.NewDatabase(t)
	t.Setenv("TOLLGATE_DATABASE_URL", url)
	ctx := t.Context()
	run := func(args ...string) string {
		t.Helper()
		var logs bytes.Buffer
		if err := migrate(ctx, slog.New(slog.NewJSONHandler(&logs, nil)), args, io.Discard); err != nil {
			t.Fatalf("migrate %v: %v", args, err)
		}
		return logs.String()
	}
	run()
	s, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	latest := len(files)
	for _, to := range []string{"99", strconv.Itoa(latest)} {
		logs := run("--down-to", to)
		if strings.Contains(logs, "migrations rolled back") || !strings.Contains(logs, `"level":"WARN","msg":"nothing rolled back`) ||
			!strings.Contains(logs, fmt.Sprintf(`"version":%d,"to_version":%s`, latest, to)) {
			t.Fatalf("migrate --down-to %s at version %d logged:\n%s\nwant a warning that nothing was rolled back", to, latest, logs)
		}
		if err := s.CheckMigrated(ctx); err != nil {
			t.Fatalf("after migrate --down-to %s: %v", to, err)
		}
	}
	to := latest - 2
	want := fmt.Sprintf(`"msg":"migrations rolled back","count":2,"from_version":%d,"to_version":%d`, latest, to)
	if logs := run("--down-to", strconv.Itoa(to)); !strings.Contains(logs, want) {
		t.Fatalf("migrate --down-to %d at version %d logged:\n%s", to, latest, logs)
	}
	if err := s.CheckMigrated(ctx); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at migration %d", to)) {
		t.Fatalf("after migrate --down-to %d: %v", to, err)
	}

	// A rollback of a database that is not there fails and creates
	// nothing; it used to create an empty database and warn that nothing
	// was rolled back.
	missing := url + "_missing"
	if i := strings.Index(url, "?"); i >= 0 {
		missing = url[:i] + "_missing" + url[i:]
	}
	t.Setenv("TOLLGATE_DATABASE_URL", missing)
	t.Cleanup(func() { // only when this test fails: the database it should not have made
		u, err := neturl.Parse(missing)
		if err != nil {
			return
		}
		name := strings.TrimPrefix(u.Path, "/")
		u.Path = "/postgres"
		if admin, err := pgx.Connect(context.Background(), u.String()); err == nil {
			admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			admin.Close(context.Background())
		}
	})
	err = migrate(ctx, slog.New(slog.DiscardHandler), []string{"--down-to", "0"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("migrate --down-to 0 on a missing database = %v, want an error saying it does not exist", err)
	}
	if s, err := ledger.OpenExisting(ctx, missing); err == nil {
		s.Close()
		t.Fatalf("migrate --down-to 0 created the missing database %s", missing)
	}
}

// TestMigrateSaysHowManyApplied: `tollgate migrate` logs how many
// migrations it applied: every one on a new database, none on a database
// already at the latest. An operator reads it to know whether an upgrade's
// migrations ran; a count lost on the way (migrateLogged) said 0 for both.
func TestMigrateSaysHowManyApplied(t *testing.T) {
	t.Setenv("TOLLGATE_DATABASE_URL", ledgertest.NewDatabase(t))
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v, %v", files, err)
	}
	for _, want := range []int{len(files), 0} {
		var logs bytes.Buffer
		if err := migrate(t.Context(), slog.New(slog.NewJSONHandler(&logs, nil)), nil, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), fmt.Sprintf(`"msg":"migrations applied","count":%d}`, want)) {
			t.Fatalf("tollgate migrate logged:\n%s\nwant \"migrations applied\" with count %d", logs.String(), want)
		}
	}
}
