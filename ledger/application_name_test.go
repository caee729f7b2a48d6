package ledger_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// sessionNames is the application_name of each session on dbURL's
// database but the caller's own, as pg_stat_activity shows them.
func sessionNames(t *testing.T, dbURL string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT application_name FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, a := range names {
		n[a]++
	}
	return n
}

// TestSessionsCarryTheirApplicationName: an operator looking at
// pg_stat_activity could not tell a gateway's, a meter's and an admin
// process's sessions apart: none set application_name. A store opened
// with ledger.ApplicationName names its sessions so, unless the database
// url names them already (the operator's name wins).
func TestSessionsCarryTheirApplicationName(t *testing.T) {
	ctx := context.Background()
	dbURL := ledgertest.NewDatabase(t)
	for _, tc := range []struct {
		url, name, want string
		lazy            bool
	}{
		{dbURL, "tollgate-meter", "tollgate-meter", false},
		{dbURL, "tollgate-gateway", "tollgate-gateway", true},
		{withParam(t, dbURL, "application_name", "ops-batch"), "tollgate-admin", "ops-batch", false},
	} {
		var s *ledger.Store
		var err error
		if tc.lazy {
			if s, err = ledger.OpenLazy(tc.url, ledger.ApplicationName(tc.name)); err == nil {
				err = s.Ping(ctx)
			}
		} else {
			s, err = ledger.Open(ctx, tc.url, ledger.ApplicationName(tc.name))
		}
		if err != nil {
			t.Fatal(err)
		}
		names := sessionNames(t, dbURL)
		s.Close()
		if names[tc.want] == 0 || len(names) != 1 {
			t.Errorf("a store opened with ApplicationName(%q) on %s: sessions named %v; want %q alone", tc.name, tc.url, names, tc.want)
		}
		for deadline := time.Now().Add(5 * time.Second); len(sessionNames(t, dbURL)) > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("sessions %v still open 5 s after the store closed", sessionNames(t, dbURL))
			}
		}
	}
}

// withParam is dbURL with the query parameter k=v added.
func withParam(t *testing.T, dbURL, k, v string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}
