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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	base := os.Getenv(EnvURL)
	if base == "" {
		base = defaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("ledgertest: Postgres is unreachable at %s (set %s): %v", base, EnvURL, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tollgate_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("ledgertest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("ledgertest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("ledgertest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("ledgertest: %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
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
