package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
	url := ledgertest.NewDatabase(t)
	s, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
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
