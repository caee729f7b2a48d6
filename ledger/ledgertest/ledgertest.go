// Package ledgertest hands each test a fresh, migrated Postgres database of
// its own on the real server, and drops it when the test ends. There are no
// mocks: tests run against Postgres as production does.
package ledgertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3/lock"

	"github.com/tollgate-dev/tollgate/ledger"
)

// EnvURL names the environment variable with the server to create test
// databases on. It defaults to the local server's "postgres" database.
const EnvURL = "TOLLGATE_TEST_DATABASE_URL"

const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// NewDatabase creates an empty database named tollgate_test_<random>, drops
// it (forcibly) when the test ends, and returns its URL. It fails the test
// when Postgres is unreachable: such tests never skip.
func NewDatabase(t testing.TB) string {
	t.Helper()
	name := "tollgate_test_" + randomHex()
	createThenDrop(t, "database "+name, "CREATE DATABASE "+name, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return databaseURL(t, name, nil)
}

// MissingDatabase returns the URL of a database named
// tollgate_test_<random> that does not exist, for a test of code that must
// not create it, and exists, which reports whether it does now. It is
// dropped when the test ends, should the code under test have created it.
func MissingDatabase(t testing.TB) (dbURL string, exists func() bool) {
	t.Helper()
	name := "tollgate_test_" + randomHex()
	createThenDrop(t, "database "+name, "SELECT 1", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	exists = func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverBase())
		if err != nil {
			t.Fatalf("ledgertest: %v", err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatalf("ledgertest: %v", err)
		}
		return n == 1
	}
	return databaseURL(t, name, nil), exists
}

// NewOwnedDatabase creates an ordinary login role named
// tollgate_test_role_<random> (not a superuser, without CREATEDB or
// CREATEROLE) and an empty database owned by it, drops both (the database
// first, forcibly) when the test ends, even when it fails, and returns the
// database's URL with that role as its user, and the role's name: a test
// connecting with it runs as an operator's application role does. The
// server's trust auth lets it in without a password.
func NewOwnedDatabase(t testing.TB) (dbURL, role string) {
	t.Helper()
	suffix := randomHex()
	role, name := "tollgate_test_role_"+suffix, "tollgate_test_"+suffix
	// Cleanups run last first: the database goes, then its owner.
	createThenDrop(t, "role "+role, "CREATE ROLE "+role+" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS",
		"DROP ROLE IF EXISTS "+role)
	createThenDrop(t, "database "+name, "CREATE DATABASE "+name+" OWNER "+role, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return databaseURL(t, name, url.User(role)), role
}

// SuperuserURL returns dbURL (a database NewDatabase or NewOwnedDatabase
// made) with the user of the server's URL (EnvURL's, or the default's
// postgres superuser) in place of its own, for what only that user may do.
func SuperuserURL(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	u.User = serverURL(t).User
	return u.String()
}

// serverBase is the URL of the server tests make their databases on.
func serverBase() string {
	if base := os.Getenv(EnvURL); base != "" {
		return base
	}
	return defaultURL
}

// serverURL is serverBase, parsed.
func serverURL(t testing.TB) *url.URL {
	t.Helper()
	u, err := url.Parse(serverBase())
	if err != nil {
		t.Fatalf("ledgertest: %s: %v", EnvURL, err)
	}
	return u
}

// databaseURL is the URL of the database name on the server, as user (nil:
// the server URL's own).
func databaseURL(t testing.TB, name string, user *url.Userinfo) string {
	t.Helper()
	u := serverURL(t)
	u.Path = "/" + name
	if user != nil {
		u.User = user
	}
	return u.String()
}

// randomHex is 12 random hex digits, for names no other test takes.
func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createThenDrop runs create on the server, failing the test when Postgres
// is unreachable or refuses it, and runs drop when the test ends, whatever
// its outcome. what names the object in failures.
func createThenDrop(t testing.TB, what, create, drop string) {
	t.Helper()
	base := serverBase()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("ledgertest: Postgres is unreachable at %s (set %s): %v", base, EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("ledgertest: create %s: %v", what, err)
	}
	t.Cleanup(func() {
		// DROP DATABASE waits for a checkpoint: on a Postgres busy with
		// writes (other tests, other load) that took over 30 s once (a
		// run beside a load test, 2026-12-05).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("ledgertest: drop %s: %v", what, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, drop); err != nil {
			t.Errorf("ledgertest: drop %s: %v", what, err)
		}
	})
}

// NewStore returns a Store over a fresh migrated database (see NewDatabase),
// closed when the test ends.
func NewStore(t testing.TB) *ledger.Store {
	t.Helper()
	s, _ := NewStoreURL(t)
	return s
}

// NewStoreURL is NewStore, also returning the database's URL for tests
// that reach the database directly (to set up what no API makes).
func NewStoreURL(t testing.TB) (*ledger.Store, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := NewDatabase(t)
	s, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	return s, url
}

// RefuseConnections makes the database at dbURL (one NewDatabase made)
// refuse new connections and ends the open ones, as a Postgres going down
// does to its clients, and returns the function that lets connections in
// again (it is also run when the test ends, before the drop).
func RefuseConnections(t testing.TB, dbURL string) (allow func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	name := pgx.Identifier{db}.Sanitize()
	u.Path = "/postgres"
	admin := u.String()
	exec := func(ctx context.Context, sqls ...string) error {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for _, q := range sqls {
			if _, err := conn.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	if err := exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+strings.ReplaceAll(db, "'", "''")+"'"); err != nil {
		t.Fatalf("ledgertest: refuse connections: %v", err)
	}
	allowed := false
	allow = func() {
		if allowed {
			return
		}
		allowed = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true"); err != nil {
			t.Errorf("ledgertest: allow connections: %v", err)
		}
	}
	t.Cleanup(allow)
	return allow
}

// HoldMigrationLock takes the migration lock (goose's session-level
// advisory lock, which ledger.Store.Migrate waits for) on the database at
// dbURL, in a session named app (application_name), as a stuck migrator
// would, and returns that session's backend pid. The session ends when
// the test does.
func HoldMigrationLock(t testing.TB, dbURL, app string) uint32 {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("ledgertest: hold the migration lock: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock.DefaultLockID); err != nil {
		t.Fatalf("ledgertest: hold the migration lock: %v", err)
	}
	return conn.PgConn().PID()
}

// AwayFromMidnight waits past the next UTC midnight when it is less than
// 30 s away, so that a test that writes events at its own clock and reads
// a day's spend by Postgres's reads one UTC day.
func AwayFromMidnight(t testing.TB) {
	t.Helper()
	now := time.Now().UTC()
	if left := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now); left < 30*time.Second {
		t.Logf("waiting %s for the UTC day to turn", left+time.Second)
		time.Sleep(left + time.Second)
	}
}
