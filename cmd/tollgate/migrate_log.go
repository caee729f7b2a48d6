package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// migrateReportEvery is how often migrateLogged says who holds the
// migration lock while the migrations have not returned.
var migrateReportEvery = 15 * time.Second

// migrateLogged applies the migrations (ledger.Store.Migrate), logging
// every migrateReportEvery while they have not returned which session
// holds the migration lock: this process's own migrations at work,
// another process's, or a killed migrator's session that has not ended
// yet. A wait of up to 10 minutes was silent.
func migrateLogged(ctx context.Context, log *slog.Logger, s *ledger.Store) (int, error) {
	var n int
	err := lockWaitLogged(ctx, log, s, func() (err error) {
		n, err = s.Migrate(ctx)
		return err
	})
	return n, err
}

// migrateDownLogged rolls back to version to (ledger.Store.MigrateDown),
// logging who holds the migration lock meanwhile as migrateLogged does: a
// rollback takes the same lock and waits as long for it.
func migrateDownLogged(ctx context.Context, log *slog.Logger, s *ledger.Store, to int64) (from int64, n int, err error) {
	err = lockWaitLogged(ctx, log, s, func() (err error) {
		from, n, err = s.MigrateDown(ctx, to)
		return err
	})
	return from, n, err
}

// lockWaitLogged runs migrate (which takes the migration lock), logging
// every migrateReportEvery until it returns which session holds the lock.
func lockWaitLogged(ctx context.Context, log *slog.Logger, s *ledger.Store, migrate func() error) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(migrateReportEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if h, err := s.MigrationLockHolder(ctx); err == nil && h != "" {
				// The holder may be this process, applying a long
				// migration: its statement says which.
				log.Info("migrations not done yet: the migration lock is held", "holder", h,
					"hint", "if that session is this process's or another's migration at work, wait, or end what it waits for "+
						"(an old transaction: an export, a pg_dump); one that runs no migration (a killed migrator's, idle) "+
						"can be ended with SELECT pg_terminate_backend(pid)")
			}
		}
	})
	err := migrate()
	close(done)
	wg.Wait()
	return err
}
