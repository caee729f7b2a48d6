package main

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestEachRoleNamesItsPostgresSessions: an operator looking at
// pg_stat_activity could not tell serve's, a gateway's, a meter's, an
// admin process's and a migration's sessions apart: none set
// application_name. Each now names its own (tollgate-serve,
// tollgate-gateway, tollgate-meter, tollgate-admin, tollgate-migrate).
func TestEachRoleNamesItsPostgresSessions(t *testing.T) {
	natsDir, addr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range []roles{{gateway: true}, {meter: true}, {admin: true}} {
		e := s.env
		e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
		a, err := start(ctx, s.log, e, s.cfg, r)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		t.Cleanup(func() { _ = a.close() })
	}
	// A migration of a new database waits on a migrator that holds the
	// lock: its session is there meanwhile.
	fresh := ledgertest.NewDatabase(t)
	ledgertest.HoldMigrationLock(t, fresh, "stuck-migrator")
	t.Setenv("TOLLGATE_DATABASE_URL", fresh)
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- migrate(mctx, s.log, nil, io.Discard) }()
	defer func() { stop(); <-done }()

	want := map[string][]string{
		s.env.DatabaseURL: {"tollgate-serve", "tollgate-gateway", "tollgate-meter", "tollgate-admin"},
		fresh:             {"tollgate-migrate"},
	}
	for dbURL, want := range want {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			rows, err := conn.Query(ctx, `SELECT DISTINCT application_name FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY 1`)
			if err != nil {
				t.Fatal(err)
			}
			names, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(names, n) })
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pg_stat_activity names the sessions %q; want each role's: %q missing", names, missing)
			}
		}
	}
	select {
	case err := <-done:
		done <- err // for the deferred wait
		t.Fatalf("tollgate migrate ended while another held the migration lock: %v", err)
	default:
	}
}
